#include "engine/quant/awq_layout.h"

#include <nlohmann/json.hpp>

#include "engine/core/strings.h"
#include "engine/core/thread_pool.h"

namespace lathe {

Status check_awq_shape(int64_t rows, int64_t cols, int bits) {
  if (bits != 4)
    return invalid_argument(strformat("the AWQ GEMM layout takes 4 bits, got %d", bits));
  if (rows % 8 != 0)
    return invalid_argument(strformat(
        "a linear with %lld outputs cannot be packed in the AWQ layout (a multiple of 8 is needed)",
        static_cast<long long>(rows)));
  (void)cols;
  return Status();
}

std::vector<SafetensorsTensorSpec> awq_linear_specs(const std::string& prefix, int64_t rows,
                                                    int64_t cols, int64_t num_groups) {
  return {
      {prefix + ".qweight", "I32", {cols, rows / 8}},
      {prefix + ".qzeros", "I32", {num_groups, rows / 8}},
      {prefix + ".scales", "F16", {num_groups, rows}},
  };
}

Result<std::vector<PackedTensor>> pack_awq_linear(const std::string& prefix,
                                                  const IntQuantizedMatrix& q) {
  LATHE_RETURN_IF_ERROR(check_awq_shape(q.rows, q.cols, q.bits).with_context(prefix));
  const int64_t n = q.rows, k = q.cols, ng = q.num_groups(), words = n / 8;
  for (int64_t c = 0; c < k; ++c)
    if (q.g_idx[static_cast<size_t>(c)] != c / q.group_size)
      return invalid_argument(prefix +
                              ": the AWQ layout has no g_idx; act-order (permuted groups) cannot "
                              "be stored in it");
  int order_of[8];  // column offset -> nibble
  for (int i = 0; i < 8; ++i) order_of[kAwqOrder[i]] = i;
  std::vector<int32_t> qweight(static_cast<size_t>(k * words), 0);
  // Each task builds whole words (the 8 rows of one word index, every column), so no two write
  // the same word.
  ThreadPool::global().parallel_for(words, [&](int64_t w0, int64_t w1) {
    for (int64_t wi = w0; wi < w1; ++wi)
      for (int64_t c = 0; c < k; ++c) {
        uint32_t word = 0;
        for (int64_t i = 0; i < 8; ++i) {
          const int64_t r = wi * 8 + i;
          word |= (q.codes[static_cast<size_t>(r * k + c)] & 15u) << (4 * order_of[i]);
        }
        qweight[static_cast<size_t>(c * words + wi)] = static_cast<int32_t>(word);
      }
  });
  std::vector<int32_t> qzeros(static_cast<size_t>(ng * words), 0);
  std::vector<float> scales(static_cast<size_t>(ng * n));
  for (int64_t g = 0; g < ng; ++g)
    for (int64_t r = 0; r < n; ++r) {
      const IntGroupParams p = q.params(r, g);
      uint32_t& w = reinterpret_cast<uint32_t&>(qzeros[static_cast<size_t>(g * words + r / 8)]);
      w |= (static_cast<uint32_t>(p.zero) & 15u) << (4 * order_of[r % 8]);
      scales[static_cast<size_t>(g * n + r)] = p.scale;
    }
  const std::vector<SafetensorsTensorSpec> specs = awq_linear_specs(prefix, n, k, ng);
  std::vector<PackedTensor> out(3);
  out[0] = {specs[0], int32_bytes(qweight)};
  out[1] = {specs[1], int32_bytes(qzeros)};
  out[2] = {specs[2], float_bytes(scales, "F16")};
  return out;
}

std::string awq_quant_config_json(int64_t group_size, bool zero_point) {
  nlohmann::ordered_json j;
  j["zero_point"] = zero_point;
  j["q_group_size"] = group_size;
  j["w_bit"] = 4;
  j["version"] = "GEMM";
  return j.dump(2);
}

std::string awq_quantization_config_json(int64_t group_size, bool zero_point) {
  nlohmann::ordered_json j;
  j["quant_method"] = "awq";
  j["bits"] = 4;
  j["group_size"] = group_size;
  j["zero_point"] = zero_point;
  j["version"] = "gemm";
  j["modules_to_not_convert"] = nullptr;
  return j.dump(2);
}

}  // namespace lathe
