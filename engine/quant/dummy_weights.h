// Random weights of a config's shape for `lathe quantize CONFIG_DIR --load-format dummy`: the
// speed of a quantization measured at a shape whose real checkpoint is not at hand (the 70B shape's
// weights are 140 GB). Nothing is held: each read generates the elements asked for, so a tensor
// costs memory only while the caller holds it.
//
// Values (float32, every one exactly representable in bf16):
//   norms (names ending in "norm": attn_norm, ffn_norm, output_norm, attn_q_norm, attn_k_norm) 1;
//   biases (names ending in "_bias") 0;
//   every other tensor (embedding, projections, LM head) ~N(0, 0.02), rounded to bf16.
// Element i of tensor `name` is a function of (name, i) only: the same for every read, slice and
// thread count (Philox-4x32-10 keyed by the FNV-1a hash of the name, counter i / 4, Box-Muller).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/model_config.h"

namespace lathe {

constexpr float kDummyWeightStd = 0.02f;

class DummyWeights {
 public:
  DummyWeights() = default;
  // The tensors of expected_tensors(config) (tensor_names.h): canonical names, PyTorch shapes.
  explicit DummyWeights(const ModelConfig& config);

  bool has(const std::string& canonical) const { return shapes_.count(canonical) != 0; }
  // The tensor's shape; empty when there is no such tensor.
  std::vector<int64_t> shape(const std::string& canonical) const;
  int64_t numel(const std::string& canonical) const;

  // Elements [offset, offset + count) of the tensor in row-major order into out[0 .. count).
  // kNotFound for a name the config has no tensor for; kInvalidArgument for a range outside it.
  Status read(const std::string& canonical, int64_t offset, int64_t count, float* out) const;
  // The whole tensor.
  Result<std::vector<float>> read(const std::string& canonical) const;

 private:
  std::map<std::string, std::vector<int64_t>> shapes_;
};

}  // namespace lathe
