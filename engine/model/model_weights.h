// Checks the tensors found in model files against what the config implies and fills the
// WeightStore. Shared by the GGUF and Hugging Face loaders.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/status.h"
#include "engine/core/tensor_view.h"
#include "engine/model/model_config.h"
#include "engine/model/weight_store.h"

namespace lathe {

// A tensor from a model file, already in PyTorch shape order, under its canonical name.
struct FileTensor {
  TensorView view;
  std::string file_name;  // its name in the file ("model.layers.0.self_attn.q_proj.weight")
  std::string file;       // the file's path, for errors
};

// Adds every tensor `config` implies (tensor_names.h) from `found` to `store`. Errors:
//   kNotFound: an expected tensor is missing (names the canonical and the file name it would have);
//   kCorruptFile: a shape differs ("'blk.0.attn_q' (model.layers.0...) in FILE has shape [64, 32],
//     expected [32, 32] from the model config");
//   kUnsupported: a norm or bias stored quantized, or a matrix in a type Lathe cannot compute with.
// Tensors Lathe does not use are skipped with a debug log.
// With `quantized_checkpoint` (the checkpoint has a quantization config), a projection may instead
// be stored as quantized parts under "<canonical>.<part>" (tensor_names.h), or as a plain weight of
// a quantized type (fp8, int8): both are added as found, and the checkpoint's weight scheme
// (weight_scheme.h) checks them against the config.
Status collect_weights(const ModelConfig& config, const std::map<std::string, FileTensor>& found,
                       WeightStore* store, bool quantized_checkpoint = false);

// "f32, f16, bf16, q8_0, ..." : the types the CPU and the loaders compute with.
std::string supported_weight_types();

// Bytes per group (same groups and order as summarize_dtypes), every stored tensor counted.
std::vector<std::pair<std::string, int64_t>> group_bytes(const ModelConfig& config,
                                                         const WeightStore& store);

// Per-group storage types in the order embedding, attention, mlp, norms, output, e.g.
// {"embedding", "q8_0"}, {"attention", "q4_1"}, {"mlp", "q4_k+q6_k"}, {"norms", "f32"},
// {"output", "tied"}. Several types in one group are joined with '+', most bytes first.
std::vector<std::pair<std::string, std::string>> summarize_dtypes(const ModelConfig& config,
                                                                  const WeightStore& store);

// The type holding the most bytes among the layer matrices (for ModelConfig::weight_dtype).
DType dominant_layer_dtype(const WeightStore& store, DType fallback);

}  // namespace lathe
