// The AWQ "GEMM" checkpoint layout (AutoAWQ's, as vLLM and transformers load it) of one linear with
// K inputs, N outputs and G groups of 4-bit codes:
//   <prefix>.qweight  I32 [K, N / 8]  nibble i of word (k, c) holds weight (n = 8c + order[i], k)
//   <prefix>.qzeros   I32 [G, N / 8]  zero points (no offset), same nibble order
//   <prefix>.scales   F16 [G, N]
// with order = [0, 2, 4, 6, 1, 3, 5, 7] and w = (q - z) * s; no g_idx (groups are contiguous).
// The config goes to quant_config.json and config.json's quantization_config (quant_method
// "awq", version "gemm").
#pragma once

#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/quant/int_quant.h"
#include "engine/quant/packed_tensor.h"

namespace lathe {

// The nibble order of AutoAWQ's GEMM packing: nibble i holds column 8c + kAwqOrder[i].
constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};

// kInvalidArgument unless 4 bits and N a multiple of 8.
Status check_awq_shape(int64_t rows, int64_t cols, int bits);

std::vector<SafetensorsTensorSpec> awq_linear_specs(const std::string& prefix, int64_t rows,
                                                    int64_t cols, int64_t num_groups);

// Packs a quantized matrix whose groups are contiguous (g_idx[k] == k / group_size).
Result<std::vector<PackedTensor>> pack_awq_linear(const std::string& prefix,
                                                  const IntQuantizedMatrix& q);

// quant_config.json's text (AutoAWQ's names) and config.json's quantization_config (transformers'
// AwqConfig names).
std::string awq_quant_config_json(int64_t group_size, bool zero_point);
std::string awq_quantization_config_json(int64_t group_size, bool zero_point);

}  // namespace lathe
