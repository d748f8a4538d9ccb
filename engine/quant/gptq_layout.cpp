#include "engine/quant/gptq_layout.h"

#include <nlohmann/json.hpp>

#include "engine/core/strings.h"
#include "engine/core/thread_pool.h"

namespace lathe {

Status check_gptq_shape(int64_t rows, int64_t cols, int bits) {
  if (bits != 4 && bits != 8)
    return invalid_argument(strformat("the GPTQ layout takes 4 or 8 bits, got %d", bits));
  const int64_t pack = 32 / bits;
  if (cols % pack != 0 || rows % pack != 0)
    return invalid_argument(strformat(
        "a [%lld, %lld] linear cannot be packed in the GPTQ layout: both dimensions must be "
        "multiples of %lld",
        static_cast<long long>(rows), static_cast<long long>(cols), static_cast<long long>(pack)));
  return Status();
}

std::vector<SafetensorsTensorSpec> gptq_linear_specs(const std::string& prefix, int64_t rows,
                                                     int64_t cols, int bits, int64_t num_groups) {
  const int64_t pack = 32 / bits;
  return {
      {prefix + ".qweight", "I32", {cols / pack, rows}},
      {prefix + ".qzeros", "I32", {num_groups, rows / pack}},
      {prefix + ".scales", "F16", {num_groups, rows}},
      {prefix + ".g_idx", "I32", {cols}},
  };
}

Result<std::vector<PackedTensor>> pack_gptq_linear(const std::string& prefix,
                                                   const IntQuantizedMatrix& q) {
  LATHE_RETURN_IF_ERROR(check_gptq_shape(q.rows, q.cols, q.bits).with_context(prefix));
  const int64_t n = q.rows, k = q.cols, ng = q.num_groups(), b = q.bits, pack = 32 / b;
  const uint32_t mask = (1u << b) - 1;
  std::vector<SafetensorsTensorSpec> specs = gptq_linear_specs(prefix, n, k, q.bits, ng);
  // qweight [k / pack, n]: word (p, r) packs codes r, p * pack .. p * pack + pack - 1 (the first in
  // the low bits). Words are built whole, packed rows split over the thread pool.
  std::vector<int32_t> qweight(static_cast<size_t>(k / pack * n), 0);
  ThreadPool::global().parallel_for(k / pack, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p)
      for (int64_t r = 0; r < n; ++r) {
        const uint8_t* src = q.codes.data() + r * k + p * pack;
        uint32_t w = 0;
        for (int64_t j = 0; j < pack; ++j) w |= (static_cast<uint32_t>(src[j]) & mask) << (b * j);
        qweight[static_cast<size_t>(p * n + r)] = static_cast<int32_t>(w);
      }
  });
  std::vector<int32_t> qzeros(static_cast<size_t>(ng * (n / pack)), 0);
  std::vector<float> scales(static_cast<size_t>(ng * n));
  for (int64_t g = 0; g < ng; ++g)
    for (int64_t r = 0; r < n; ++r) {
      const IntGroupParams p = q.params(r, g);
      if (p.zero < 1)
        return invalid_argument(prefix +
                                ": a zero point of 0 cannot be stored in the GPTQ v1 layout "
                                "(it stores zero - 1); quantize with min_zero = 1");
      const uint32_t stored = static_cast<uint32_t>(p.zero - 1) & mask;
      uint32_t& w =
          reinterpret_cast<uint32_t&>(qzeros[static_cast<size_t>(g * (n / pack) + r / pack)]);
      w |= stored << (b * (r % pack));
      scales[static_cast<size_t>(g * n + r)] = p.scale;
    }
  std::vector<PackedTensor> out(4);
  out[0] = {specs[0], int32_bytes(qweight)};
  out[1] = {specs[1], int32_bytes(qzeros)};
  out[2] = {specs[2], float_bytes(scales, "F16")};
  out[3] = {specs[3], int32_bytes(q.g_idx)};
  return out;
}

std::string gptq_quantize_config_json(const GptqLayoutConfig& c) {
  nlohmann::ordered_json j;
  j["bits"] = c.bits;
  j["group_size"] = c.group_size;
  j["desc_act"] = c.desc_act;
  j["sym"] = c.symmetric;
  j["damp_percent"] = c.damp_percent;
  j["true_sequential"] = true;
  j["static_groups"] = false;
  j["lm_head"] = false;
  j["quant_method"] = "gptq";
  j["checkpoint_format"] = "gptq";
  j["meta"] = {{"quantizer", {"lathe"}}, {"method", c.method}};
  return j.dump(2);
}

}  // namespace lathe
