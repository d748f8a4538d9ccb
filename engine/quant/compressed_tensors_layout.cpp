#include "engine/quant/compressed_tensors_layout.h"

#include <nlohmann/json.hpp>

namespace lathe {
using ojson = nlohmann::ordered_json;

namespace {

ojson quantization_config(const std::string& format, const ojson& weights, const ojson& inputs) {
  ojson group;
  group["targets"] = {"Linear"};
  group["weights"] = weights;
  group["input_activations"] = inputs;
  group["output_activations"] = nullptr;
  ojson j;
  j["quant_method"] = "compressed-tensors";
  j["format"] = format;
  j["quantization_status"] = "compressed";
  j["config_groups"] = {{"group_0", group}};
  j["ignore"] = {"lm_head"};
  j["kv_cache_scheme"] = nullptr;
  j["global_compression_ratio"] = nullptr;
  j["sparsity_config"] = ojson::object();
  return j;
}

ojson args(int bits, const char* type, bool symmetric, const char* strategy, bool dynamic) {
  ojson a;
  a["num_bits"] = bits;
  a["type"] = type;
  a["symmetric"] = symmetric;
  a["strategy"] = strategy;
  a["group_size"] = nullptr;
  a["block_structure"] = nullptr;
  a["dynamic"] = dynamic;
  a["actorder"] = nullptr;
  a["observer"] = dynamic ? nullptr : ojson("minmax");
  a["observer_kwargs"] = ojson::object();
  return a;
}

bool identity_groups(const IntQuantizedMatrix& q) {
  for (int64_t c = 0; c < q.cols; ++c)
    if (q.g_idx[static_cast<size_t>(c)] != c / q.group_size) return false;
  return true;
}

}  // namespace

std::vector<SafetensorsTensorSpec> ct_int_linear_specs(const std::string& prefix, int64_t rows,
                                                       int64_t cols, int bits, int64_t num_groups,
                                                       bool symmetric, bool with_g_idx,
                                                       const std::string& scale_dtype) {
  const int64_t pack = 32 / bits;
  std::vector<SafetensorsTensorSpec> s;
  s.push_back({prefix + ".weight_packed", "I32", {rows, (cols + pack - 1) / pack}});
  s.push_back({prefix + ".weight_scale", scale_dtype, {rows, num_groups}});
  if (!symmetric)
    s.push_back({prefix + ".weight_zero_point", "I32", {(rows + pack - 1) / pack, num_groups}});
  if (with_g_idx) s.push_back({prefix + ".weight_g_idx", "I32", {cols}});
  s.push_back({prefix + ".weight_shape", "I32", {2}});
  return s;
}

Result<std::vector<PackedTensor>> pack_ct_int_linear(const std::string& prefix,
                                                     const IntQuantizedMatrix& q,
                                                     const std::string& scale_dtype) {
  if (q.bits != 4 && q.bits != 8)
    return invalid_argument(prefix + ": pack-quantized takes 4 or 8 bits");
  const int64_t n = q.rows, k = q.cols, ng = q.num_groups(), b = q.bits, pack = 32 / b;
  const int64_t kw = (k + pack - 1) / pack, nw = (n + pack - 1) / pack;
  const uint32_t mask = (1u << b) - 1;
  const bool with_g_idx = !identity_groups(q);
  std::vector<int32_t> packed(static_cast<size_t>(n * kw), 0);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) {
      uint32_t& w = reinterpret_cast<uint32_t&>(packed[static_cast<size_t>(r * kw + c / pack)]);
      w |= (q.codes[static_cast<size_t>(r * k + c)] & mask) << (b * (c % pack));
    }
  std::vector<float> scales(static_cast<size_t>(n * ng));
  std::vector<int32_t> zp(static_cast<size_t>(nw * ng), 0);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t g = 0; g < ng; ++g) {
      const IntGroupParams p = q.params(r, g);
      scales[static_cast<size_t>(r * ng + g)] = p.scale;
      uint32_t& w = reinterpret_cast<uint32_t&>(zp[static_cast<size_t>((r / pack) * ng + g)]);
      w |= (static_cast<uint32_t>(p.zero) & mask) << (b * (r % pack));
    }
  const std::vector<SafetensorsTensorSpec> specs =
      ct_int_linear_specs(prefix, n, k, q.bits, ng, q.symmetric, with_g_idx, scale_dtype);
  std::vector<PackedTensor> out;
  for (const SafetensorsTensorSpec& s : specs) {
    const std::string suffix = s.name.substr(prefix.size() + 1);
    if (suffix == "weight_packed") out.push_back({s, int32_bytes(packed)});
    if (suffix == "weight_scale") out.push_back({s, float_bytes(scales, scale_dtype)});
    if (suffix == "weight_zero_point") out.push_back({s, int32_bytes(zp)});
    if (suffix == "weight_g_idx") out.push_back({s, int32_bytes(q.g_idx)});
    if (suffix == "weight_shape")
      out.push_back({s, int32_bytes({static_cast<int32_t>(n), static_cast<int32_t>(k)})});
  }
  return out;
}

std::vector<SafetensorsTensorSpec> ct_fp8_linear_specs(const std::string& prefix, int64_t rows,
                                                       int64_t cols, Fp8ScaleKind kind) {
  std::vector<int64_t> scale_shape;
  switch (kind) {
    case Fp8ScaleKind::kTensor:
      scale_shape = {1};
      break;
    case Fp8ScaleKind::kChannel:
      scale_shape = {rows, 1};
      break;
    case Fp8ScaleKind::kBlock:
      scale_shape = {(rows + kFp8BlockSize - 1) / kFp8BlockSize,
                     (cols + kFp8BlockSize - 1) / kFp8BlockSize};
      break;
  }
  return {{prefix + ".weight", "F8_E4M3", {rows, cols}},
          {prefix + ".weight_scale", "F32", scale_shape}};
}

std::vector<PackedTensor> pack_ct_fp8_linear(const std::string& prefix, const Fp8Matrix& m) {
  const std::vector<SafetensorsTensorSpec> specs =
      ct_fp8_linear_specs(prefix, m.rows, m.cols, m.kind);
  return {{specs[0], m.codes}, {specs[1], float_bytes(m.scales, "F32")}};
}

std::string ct_int_quantization_config_json(int bits, int64_t group_size, bool symmetric,
                                            bool act_order) {
  ojson w = args(bits, "int", symmetric, group_size > 0 ? "group" : "channel", false);
  if (group_size > 0) w["group_size"] = group_size;
  if (act_order) w["actorder"] = "group";
  return quantization_config("pack-quantized", w, nullptr).dump(2);
}

std::string ct_fp8_quantization_config_json(Fp8ScaleKind kind) {
  ojson w = args(8, "float", true, fp8_scale_kind_name(kind), false);
  ojson in = args(8, "float", true, "token", true);
  if (kind == Fp8ScaleKind::kBlock) {
    w["block_structure"] = {kFp8BlockSize, kFp8BlockSize};
    in["strategy"] = "group";
    in["group_size"] = kFp8BlockSize;
  }
  return quantization_config("float-quantized", w, in).dump(2);
}

}  // namespace lathe
