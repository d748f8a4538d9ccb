// The GPTQ v1 checkpoint layout (AutoGPTQ's, as vLLM and transformers load it) of one linear with
// K inputs, N outputs, G groups, b bits (pack = 32 / b codes per int32 word):
//   <prefix>.qweight  I32 [K / pack, N]  weight (k, n) in bits b*(k % pack) of word (k / pack, n)
//   <prefix>.qzeros   I32 [G, N / pack]  zero point (g, n) minus 1, in bits b*(n % pack) of word
//                                        (g, n / pack) ("v1": symmetric 4-bit stores 7)
//   <prefix>.scales   F16 [G, N]
//   <prefix>.g_idx    I32 [K]            group of each input row
// and w[n, k] = scales[g_idx[k], n] * (q - (stored_zero + 1)). The quantization config goes to
// quantize_config.json and to config.json's quantization_config (quant_method "gptq",
// checkpoint_format "gptq").
#pragma once

#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/quant/int_quant.h"
#include "engine/quant/packed_tensor.h"

namespace lathe {

struct GptqLayoutConfig {
  int bits = 4;
  int64_t group_size = 128;  // -1: per channel
  bool symmetric = true;
  bool desc_act = false;
  double damp_percent = 0.1;
  std::string method = "rtn";  // how the codes were chosen, recorded in "meta"
};

// kInvalidArgument when a [rows, cols] linear cannot be packed (rows and cols must be multiples of
// 32 / bits).
Status check_gptq_shape(int64_t rows, int64_t cols, int bits);

// The tensors of one linear, for planning the file before the data exists.
std::vector<SafetensorsTensorSpec> gptq_linear_specs(const std::string& prefix, int64_t rows,
                                                     int64_t cols, int bits, int64_t num_groups);

// Packs a quantized matrix (scales must be f16-representable; zero points >= 1, see
// IntQuantConfig::min_zero).
Result<std::vector<PackedTensor>> pack_gptq_linear(const std::string& prefix,
                                                   const IntQuantizedMatrix& q);

// quantize_config.json's text; config.json's quantization_config is the same object.
std::string gptq_quantize_config_json(const GptqLayoutConfig& config);

}  // namespace lathe
