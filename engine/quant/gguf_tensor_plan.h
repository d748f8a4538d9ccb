// The tensors of a quantized GGUF file for a model: every tensor the config implies (and a
// rope_freqs tensor for a Llama 3 rope scaling), named as llama.cpp names them, in llama.cpp's
// order (globals first, then block by block, by name within each: weight_name_comparer), each in
// the type llama.cpp's mix gives it for the file type (gguf_type_mix.h; unquantized tensors f32).
// Shared by the quantizing writer (gguf_quant_writer.h) and the random-weight file writer
// (dummy_gguf_file.h), so that both write the same layout.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/model/model_config.h"
#include "engine/quant/gguf_type_mix.h"
#include "engine/quant/gguf_writer.h"

namespace lathe {

// The canonical name the plan gives the rope_freqs tensor (no canonical name exists for it).
inline constexpr const char* kGgufRopeFreqs = "rope_freqs";

struct GgufPlannedTensor {
  std::string canonical;  // Lathe's name ("blk.0.attn_q"), or kGgufRopeFreqs
  int64_t layer = -1;     // block index; -1 for globals
  GgufTensorSpec spec;    // GGUF name, type and PyTorch-order shape
};

// `shape_of(canonical)`: the tensor's PyTorch-order shape (a checkpoint's own, or
// expected_tensors()'); `rope_freqs_len`: elements of the rope_freqs tensor, 0 for none.
std::vector<GgufPlannedTensor> plan_gguf_tensors(
    const ModelConfig& config, GgufFileType file_type,
    const std::function<std::vector<int64_t>(const std::string&)>& shape_of,
    int64_t rope_freqs_len);

// general.file_type and general.quantization_version (2, GGML_QNT_VERSION), as llama-quantize
// sets them.
void gguf_set_quantization_keys(GgufMetadata& metadata, GgufFileType file_type);

}  // namespace lathe
