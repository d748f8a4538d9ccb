// GPTQ checkpoints (AutoGPTQ, GPTQModel; FORMATS.md, QUANT.md): per module qweight, qzeros,
// scales and g_idx (weight_matrix.h's IntLayout::kGptq).
//
// Config (quantization_config or quantize_config.json): bits (4, 8), group_size (-1: one group per
// output channel), sym, desc_act, checkpoint_format ("gptq": zero points stored minus one, the
// default; "gptq_v2": stored as they are), lm_head (whether lm_head is quantized), and GPTQModel's
// `dynamic`: {"<regex>": {bits, group_size, sym, desc_act}, "-:<regex>": {}}, matched in order
// against module names ("model.layers.0.mlp.down_proj") with re.match; the first match wins, a
// "-:" match leaves the module unquantized (vLLM's get_dynamic_override).
//
// The zero-point convention is taken from the data when the config says sym: a symmetric
// checkpoint's zero points are all 2^(b-1) - 1 as stored by "gptq" (7 for 4 bits) or all 2^(b-1)
// as stored by "gptq_v2" (8). Real checkpoints carry the wrong label (vLLM PR #38966), so the data
// wins with a warning; zero points that are neither are an error naming the tensor. Asymmetric
// checkpoints carry no such evidence: their label is trusted.
#include <cstring>
#include <optional>

#include <nlohmann/json.hpp>

#include "engine/core/log.h"
#include "engine/core/strings.h"
#include "engine/model/tensor_names.h"
#include "engine/model/weight_scheme.h"

namespace lathe {
namespace {

using json = nlohmann::ordered_json;
using namespace scheme_detail;

struct GptqParams {
  int bits = 4;
  int64_t group_size = 128;
  bool sym = true;
  bool desc_act = false;
};

struct DynamicRule {
  std::string pattern;  // without the "+:" / "-:" prefix
  bool exclude = false;
  json overrides;
};

Status read_params(const json& j, const std::string& where, GptqParams* p) {
  for (const auto& [key, value] : j.items()) {
    if (key == "bits") {
      if (!value.is_number_integer())
        return corrupt_file(where + ": bits must be an integer, got " + value.dump());
      p->bits = value.get<int>();
      if (p->bits != 4 && p->bits != 8)
        return unsupported(
            strformat("%s: %d-bit GPTQ is not supported; Lathe reads 4- and 8-bit "
                      "GPTQ checkpoints",
                      where.c_str(), p->bits));
    } else if (key == "group_size") {
      if (!value.is_number_integer() || value.get<int64_t>() == 0 || value.get<int64_t>() < -1)
        return corrupt_file(where + ": group_size must be a positive integer or -1, got " +
                            value.dump());
      p->group_size = value.get<int64_t>();
    } else if (key == "sym" || key == "desc_act") {
      if (!value.is_boolean())
        return corrupt_file(where + ": " + key + " must be true or false, got " + value.dump());
      (key == "sym" ? p->sym : p->desc_act) = value.get<bool>();
    }
  }
  return Status();
}

class GptqScheme final : public WeightScheme {
 public:
  const char* name() const override { return "gptq"; }

  std::string description() const override {
    std::string s = strformat("gptq int%d", base_.bits);
    s += base_.group_size > 0 ? strformat(" g%lld", static_cast<long long>(base_.group_size))
                              : std::string(" per-channel");
    s += base_.sym ? " sym" : " asym";
    if (base_.desc_act) s += " desc_act";
    if (!dynamic_.empty()) s += strformat(" + %zu dynamic rules", dynamic_.size());
    return s + " (zero points " + (v1_ ? "stored minus one, gptq)" : "as stored, gptq_v2)");
  }

  Status init(const CheckpointQuant& q, const ModelConfig& config, const WeightStore& store) {
    source_ = q.source;
    const json j = json::parse(q.config_json);
    LATHE_RETURN_IF_ERROR(read_params(j, source_, &base_));
    if (!j.contains("bits")) return corrupt_file(source_ + ": a GPTQ config needs \"bits\"");
    std::string format = "gptq";
    if (const auto f = j.find("checkpoint_format"); f != j.end() && !f->is_null()) {
      if (!f->is_string() ||
          (f->get<std::string>() != "gptq" && f->get<std::string>() != "gptq_v2"))
        return unsupported(source_ + ": checkpoint_format " + f->dump() +
                           " is not supported (gptq or gptq_v2)");
      format = f->get<std::string>();
    }
    v1_ = format == "gptq";
    if (const auto l = j.find("lm_head"); l != j.end() && l->is_boolean())
      lm_head_ = l->get<bool>();
    if (const auto d = j.find("dynamic"); d != j.end() && !d->is_null()) {
      if (!d->is_object())
        return corrupt_file(source_ + ": dynamic must be an object of {\"regex\": {overrides}}");
      for (const auto& [key, value] : d->items()) {
        DynamicRule r;
        r.exclude = starts_with(key, "-:");
        r.pattern = starts_with(key, "-:") || starts_with(key, "+:") ? key.substr(2) : key;
        if (!value.is_object())
          return corrupt_file(source_ + ": dynamic[\"" + key + "\"] must be an object");
        r.overrides = value;
        GptqParams check = base_;
        LATHE_RETURN_IF_ERROR(read_params(value, source_ + " dynamic[\"" + key + "\"]", &check));
        LATHE_RETURN_IF_ERROR(regex_match_prefix(r.pattern, "", source_ + " dynamic").status());
        dynamic_.push_back(std::move(r));
      }
    }
    return resolve_zero_convention(format, config, store);
  }

  Result<WeightMatrix> matrix(const WeightStore& store, const std::string& name, int64_t n,
                              int64_t k) const override {
    LATHE_ASSIGN_OR_RETURN(std::optional<GptqParams> p, params_of(name));
    if (!p) return dense_matrix(store, name, n, k, "gptq");
    if (!has_part(store, name, "qweight"))
      return missing_part(name, "gptq", source_,
                          store.contains(name) ? "qweight (it stores a plain weight)" : "qweight");
    WeightMatrix m =
        quantized_matrix(name, WeightFormat::kInt, DType::kI32, n, k, part(store, name, "qweight"));
    WeightQuant& q = m.quant;
    q.layout = IntLayout::kGptq;
    q.bits = p->bits;
    q.symmetric = p->sym;
    q.zeros_minus_one = v1_;
    q.granularity = p->group_size > 0 ? ScaleGranularity::kGroup : ScaleGranularity::kChannel;
    q.group_size = p->group_size > 0 ? static_cast<int32_t>(p->group_size) : 0;
    q.scales = part(store, name, "scales");
    q.zeros = part(store, name, "qzeros");
    q.g_idx = part(store, name, "g_idx");
    LATHE_ASSIGN_OR_RETURN(m, checked(std::move(m), "gptq"));
    // Without act-order g_idx is k / group_size: drop it so the matrix says it is not permuted.
    if (m.quant.g_idx.ndim > 0) {
      const int64_t gs = p->group_size > 0 ? p->group_size : k;
      const int32_t* g = m.quant.g_idx.as<int32_t>();
      bool identity = true;
      for (int64_t i = 0; i < k && identity; ++i) identity = g[i] == i / gs;
      if (identity) m.quant.g_idx = TensorView{};
    }
    return m;
  }

 private:
  // The module's parameters, or nullopt when the checkpoint leaves it unquantized.
  Result<std::optional<GptqParams>> params_of(const std::string& canonical) const {
    const std::string module = hf_module_name(canonical);
    for (const DynamicRule& r : dynamic_) {
      LATHE_ASSIGN_OR_RETURN(bool match, regex_match_prefix(r.pattern, module, source_));
      if (!match) continue;
      if (r.exclude) return std::optional<GptqParams>();
      GptqParams p = base_;
      LATHE_RETURN_IF_ERROR(read_params(r.overrides, source_, &p));
      return std::optional<GptqParams>(p);
    }
    if (canonical == "output" && !lm_head_) return std::optional<GptqParams>();
    return std::optional<GptqParams>(base_);
  }

  // Votes of every symmetric module's stored zero points for "gptq" (all 2^(b-1) - 1) or
  // "gptq_v2" (all 2^(b-1)); see the file comment.
  Status resolve_zero_convention(const std::string& label, const ModelConfig& config,
                                 const WeightStore& store) {
    int v1_votes = 0, v2_votes = 0;
    std::string first_v1, first_v2;
    for (const ExpectedTensor& e : expected_tensors(config)) {
      if (e.shape.size() != 2 || e.name == "token_embd") continue;
      LATHE_ASSIGN_OR_RETURN(std::optional<GptqParams> p, params_of(e.name));
      if (!p || !p->sym) continue;
      const TensorView z = part(store, e.name, "qzeros");
      if (z.dtype != DType::kI32 || z.ndim != 2) continue;  // validate_weight_matrix reports it
      const int b = p->bits;
      const uint32_t mask = (1u << b) - 1, half = 1u << (b - 1);
      bool all_v1 = true, all_v2 = true, has_other = false;
      uint32_t other = 0;
      for (int64_t w = 0; w < z.numel(); ++w) {
        uint32_t word;
        std::memcpy(&word, z.bytes() + 4 * w, 4);
        for (int j = 0; j < 32 / b; ++j) {
          const uint32_t v = (word >> (b * j)) & mask;
          if (v != half - 1) all_v1 = false;
          if (v != half) all_v2 = false;
          if (v != half - 1 && v != half && !has_other) {
            other = v;
            has_other = true;
          }
        }
      }
      const std::string module = hf_module_name(e.name);
      if (!all_v1 && !all_v2)
        return corrupt_file(strformat(
            "%s.qzeros: the gptq config (%s) says sym: true, so every stored zero point must be "
            "%u (checkpoint_format gptq) or %u (gptq_v2), but it holds %s; the zero points "
            "disagree with the config and cannot be resolved",
            module.c_str(), source_.c_str(), half - 1, half,
            has_other ? strformat("%u", other).c_str() : "a mix of both"));
      if (all_v1) {
        if (v1_votes++ == 0) first_v1 = module;
      } else {
        if (v2_votes++ == 0) first_v2 = module;
      }
    }
    if (v1_votes > 0 && v2_votes > 0)
      return corrupt_file(source_ + ": the stored zero points follow both conventions (" +
                          first_v1 + ".qzeros as checkpoint_format gptq, " + first_v2 +
                          ".qzeros as gptq_v2); the checkpoint cannot be read consistently");
    const bool data_v1 = v1_votes > 0, data_v2 = v2_votes > 0;
    if ((data_v1 && !v1_) || (data_v2 && v1_)) {
      log_warning(source_ + ": checkpoint_format says '" + label +
                  "', but the symmetric zero points are stored as " +
                  (data_v1 ? "'gptq' writes them (zero - 1)" : "'gptq_v2' writes them (zero)") +
                  "; reading them as the data says");
      v1_ = data_v1;
    }
    return Status();
  }

  std::string source_;
  GptqParams base_;
  bool v1_ = true;
  bool lm_head_ = false;
  std::vector<DynamicRule> dynamic_;
};

}  // namespace

Result<std::unique_ptr<WeightScheme>> make_gptq_scheme(const CheckpointQuant& quant,
                                                       const ModelConfig& config,
                                                       const WeightStore& store) {
  auto s = std::make_unique<GptqScheme>();
  LATHE_RETURN_IF_ERROR(s->init(quant, config, store));
  return std::unique_ptr<WeightScheme>(std::move(s));
}

}  // namespace lathe
