// AWQ checkpoints in AutoAWQ's GEMM layout (FORMATS.md): per module qweight i32 [k, n / 8],
// qzeros i32 [groups, n / 8] and scales [groups, n], nibbles in the order [0, 2, 4, 6, 1, 3, 5, 7]
// (weight_matrix.h's IntLayout::kAwq); w = (q - z) * s.
//
// Config: transformers' AwqConfig names in config.json's quantization_config (quant_method "awq",
// bits, group_size, zero_point, version "gemm", modules_to_not_convert) or AutoAWQ's own
// quant_config.json (w_bit, q_group_size, zero_point, version "GEMM"). Modules whose name contains
// an entry of modules_to_not_convert, and lm_head, stay dense (transformers' rule).
#include <nlohmann/json.hpp>

#include "engine/core/strings.h"
#include "engine/model/weight_scheme.h"

namespace lathe {
namespace {

using json = nlohmann::ordered_json;
using namespace scheme_detail;

class AwqScheme final : public WeightScheme {
 public:
  const char* name() const override { return "awq"; }
  std::string description() const override {
    return strformat("awq int4 g%lld with zero points (GEMM)", static_cast<long long>(group_size_));
  }

  Status init(const CheckpointQuant& q) {
    source_ = q.source;
    const json j = json::parse(q.config_json);
    // The first of `keys` present (transformers' name, then AutoAWQ's).
    auto integer = [&](std::initializer_list<const char*> keys, int64_t* out) -> Status {
      for (const char* key : keys) {
        const auto it = j.find(key);
        if (it == j.end() || it->is_null()) continue;
        if (!it->is_number_integer())
          return corrupt_file(source_ + ": " + key + " must be an integer, got " + it->dump());
        *out = it->get<int64_t>();
        return Status();
      }
      return Status();
    };
    int64_t bits = 4;
    LATHE_RETURN_IF_ERROR(integer({"bits", "w_bit"}, &bits));
    if (bits != 4)
      return unsupported(
          strformat("%s: %lld-bit AWQ is not supported; the AWQ GEMM layout holds "
                    "4-bit weights",
                    source_.c_str(), static_cast<long long>(bits)));
    group_size_ = 0;
    LATHE_RETURN_IF_ERROR(integer({"group_size", "q_group_size"}, &group_size_));
    if (group_size_ <= 0)
      return corrupt_file(source_ +
                          ": an AWQ config needs a positive group_size (q_group_size), e.g. 128");
    if (const auto v = j.find("version"); v != j.end() && !v->is_null()) {
      if (!v->is_string() || !iequals(v->get<std::string>(), "gemm"))
        return unsupported(source_ + ": AWQ version " + v->dump() +
                           " is not supported; Lathe reads the GEMM layout (version \"gemm\")");
    }
    if (const auto z = j.find("zero_point"); z != j.end() && z->is_boolean() && !z->get<bool>())
      return unsupported(source_ +
                         ": AWQ without zero points (zero_point: false) is not supported; the "
                         "GEMM layout Lathe reads stores zero points");
    if (const auto m = j.find("modules_to_not_convert"); m != j.end() && !m->is_null()) {
      if (!m->is_array()) return corrupt_file(source_ + ": modules_to_not_convert must be a list");
      for (const json& s : *m) {
        if (!s.is_string())
          return corrupt_file(source_ + ": modules_to_not_convert must list module names");
        not_converted_.push_back(s.get<std::string>());
      }
    }
    return Status();
  }

  Result<WeightMatrix> matrix(const WeightStore& store, const std::string& name, int64_t n,
                              int64_t k) const override {
    const std::string module = hf_module_name(name);
    bool dense = name == "output";
    for (const std::string& m : not_converted_)
      dense = dense || module.find(m) != std::string::npos;
    if (dense) return dense_matrix(store, name, n, k, "awq");
    if (!has_part(store, name, "qweight")) return missing_part(name, "awq", source_, "qweight");
    WeightMatrix m =
        quantized_matrix(name, WeightFormat::kInt, DType::kI32, n, k, part(store, name, "qweight"));
    WeightQuant& q = m.quant;
    q.layout = IntLayout::kAwq;
    q.bits = 4;
    q.symmetric = false;
    q.granularity = ScaleGranularity::kGroup;
    q.group_size = static_cast<int32_t>(group_size_);
    q.scales = part(store, name, "scales");
    q.zeros = part(store, name, "qzeros");
    return checked(std::move(m), "awq");
  }

 private:
  std::string source_;
  int64_t group_size_ = 128;
  std::vector<std::string> not_converted_;
};

}  // namespace

Result<std::unique_ptr<WeightScheme>> make_awq_scheme(const CheckpointQuant& quant) {
  auto s = std::make_unique<AwqScheme>();
  LATHE_RETURN_IF_ERROR(s->init(quant));
  return std::unique_ptr<WeightScheme>(std::move(s));
}

}  // namespace lathe
