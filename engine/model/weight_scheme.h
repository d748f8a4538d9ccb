// How a checkpoint stores its linear weights. One handler per checkpoint scheme turns the tensors a
// loader put in the WeightStore for one projection into a WeightMatrix (weight_matrix.h), checking
// that its parts agree with the model config; bind_model_weights() (layer_weights.h) asks it
// for every projection. Today: "dense" (f32/f16/bf16 safetensors and every GGUF file, whose block
// types are formats of their own). A quantized checkpoint scheme (GPTQ, AWQ, compressed-tensors,
// FP8) is one more handler here, selected from the checkpoint's quantization_config.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/core/status.h"
#include "engine/model/weight_matrix.h"
#include "engine/model/weight_store.h"

namespace lathe {

struct LoadedModel;

class WeightScheme {
 public:
  virtual ~WeightScheme() = default;
  virtual const char* name() const = 0;  // "dense", "gptq", ...
  // The projection stored under canonical `name` (e.g. "blk.0.attn_q"), expected [n, k].
  virtual Result<WeightMatrix> matrix(const WeightStore& store, const std::string& name, int64_t n,
                                      int64_t k) const = 0;
};

// Every tensor as stored: f32/f16/bf16 as kDense, GGUF block types as kGguf.
std::unique_ptr<WeightScheme> make_dense_scheme();

// The handler for `model`'s checkpoint.
Result<std::unique_ptr<WeightScheme>> select_weight_scheme(const LoadedModel& model);

}  // namespace lathe
