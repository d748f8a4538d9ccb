// The compressed-tensors checkpoint layout (llm-compressor's output, as vLLM loads it) of one
// linear with K inputs and N outputs.
//   pack-quantized (W4A16 / W8A16, int codes; pack = 32 / bits):
//     <prefix>.weight_packed      I32 [N, ceil(K / pack)]  code (n, k) in bits b*(k % pack) of word
//                                 (n, k / pack); codes are the signed values + 2^(b-1)
//     <prefix>.weight_scale       BF16/F16 [N, G]          (G = 1 per channel)
//     <prefix>.weight_zero_point  I32 [ceil(N / pack), G]  asymmetric only; packed along N, signed
//                                 zero point + 2^(b-1) (= the unsigned zero point)
//     <prefix>.weight_g_idx       I32 [K]                  only for a permuted (act-order) grouping
//     <prefix>.weight_shape       I32 [2]                  {N, K}
//     w = scale * (signed code - signed zero point)
//   float-quantized (FP8 E4M3):
//     <prefix>.weight        F8_E4M3 [N, K]
//     <prefix>.weight_scale  F32 [N, 1] (channel), [1] (tensor), [ceil(N/128), ceil(K/128)] (block)
// config.json's quantization_config names the scheme: quant_method "compressed-tensors", format,
// config_groups.group_0 {targets ["Linear"], weights, input_activations}, ignore ["lm_head"].
#pragma once

#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/quant/fp8.h"
#include "engine/quant/int_quant.h"
#include "engine/quant/packed_tensor.h"

namespace lathe {

std::vector<SafetensorsTensorSpec> ct_int_linear_specs(const std::string& prefix, int64_t rows,
                                                       int64_t cols, int bits, int64_t num_groups,
                                                       bool symmetric, bool with_g_idx,
                                                       const std::string& scale_dtype);
// scale_dtype "BF16" or "F16" (the model's 16-bit type; scales must be representable in it).
Result<std::vector<PackedTensor>> pack_ct_int_linear(const std::string& prefix,
                                                     const IntQuantizedMatrix& q,
                                                     const std::string& scale_dtype);

std::vector<SafetensorsTensorSpec> ct_fp8_linear_specs(const std::string& prefix, int64_t rows,
                                                       int64_t cols, Fp8ScaleKind kind);
std::vector<PackedTensor> pack_ct_fp8_linear(const std::string& prefix, const Fp8Matrix& m);

// config.json's quantization_config for integer weight-only quantization (pack-quantized).
// group_size -1: strategy "channel". actorder: "group" when g_idx is written, else null.
std::string ct_int_quantization_config_json(int bits, int64_t group_size, bool symmetric,
                                            bool act_order);
// ... for FP8 weights (float-quantized): kChannel = FP8_DYNAMIC (dynamic per-token activations),
// kBlock = FP8_BLOCK (128x128 weight blocks, dynamic 1x128 activation groups), kTensor = per-tensor
// weights with dynamic per-token activations.
std::string ct_fp8_quantization_config_json(Fp8ScaleKind kind);

}  // namespace lathe
