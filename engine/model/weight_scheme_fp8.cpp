// FP8 checkpoints as vLLM (AutoFP8, `quant_method: "fp8"`) and transformers (FineGrainedFP8,
// Qwen3-FP8 / DeepSeek style) write them: per module `weight` F8_E4M3 [n, k] with
//   weight_scale      one f32 scale for the tensor (shape [] or [1]; [n] or [n, 1] is read as one
//                     per output channel), plus input_scale when activation_scheme is "static";
//   weight_scale_inv  [ceil(n / br), ceil(k / bc)] block scales when weight_block_size is [br, bc]
//                     (the name says what the value is multiplied by: w = code * weight_scale_inv).
// Config: quant_method "fp8", activation_scheme ("dynamic" | "static"), weight_block_size,
// fmt ("e4m3"), ignored_layers (vLLM) / modules_to_not_convert (transformers): modules whose name
// contains an entry stay dense, as does lm_head. w = e4m3(code) * scale (weight_dequant.h).
#include <nlohmann/json.hpp>

#include "engine/core/strings.h"
#include "engine/model/weight_scheme.h"

namespace lathe {
namespace {

using json = nlohmann::ordered_json;
using namespace scheme_detail;

class Fp8Scheme final : public WeightScheme {
 public:
  const char* name() const override { return "fp8"; }
  std::string description() const override {
    std::string s = block_rows_ > 0 ? strformat("fp8 e4m3, %lldx%lld block scales",
                                                static_cast<long long>(block_rows_),
                                                static_cast<long long>(block_cols_))
                                    : std::string("fp8 e4m3, per-tensor scales");
    return s + (static_activations_ ? ", static activation scales" : ", dynamic activations");
  }

  Status init(const CheckpointQuant& q) {
    source_ = q.source;
    const json j = json::parse(q.config_json);
    if (const auto f = j.find("fmt"); f != j.end() && !f->is_null() && *f != "e4m3")
      return unsupported(source_ + ": fp8 format " + f->dump() +
                         " is not supported; Lathe reads e4m3 weights");
    if (const auto a = j.find("activation_scheme"); a != j.end() && a->is_string()) {
      if (*a != "dynamic" && *a != "static")
        return unsupported(source_ + ": activation_scheme " + a->dump() +
                           " is not supported (dynamic or static)");
      static_activations_ = *a == "static";
    }
    if (const auto b = j.find("weight_block_size"); b != j.end() && !b->is_null()) {
      if (!b->is_array() || b->size() != 2 || !(*b)[0].is_number_integer() ||
          !(*b)[1].is_number_integer() || (*b)[0].get<int64_t>() <= 0 ||
          (*b)[1].get<int64_t>() <= 0)
        return corrupt_file(source_ + ": weight_block_size must be [rows, cols], got " + b->dump());
      block_rows_ = (*b)[0].get<int64_t>();
      block_cols_ = (*b)[1].get<int64_t>();
    }
    for (const char* key : {"ignored_layers", "modules_to_not_convert"}) {
      const auto it = j.find(key);
      if (it == j.end() || it->is_null()) continue;
      if (!it->is_array()) return corrupt_file(source_ + ": " + key + " must be a list");
      for (const json& s : *it) {
        if (!s.is_string()) return corrupt_file(source_ + ": " + key + " must list module names");
        ignored_.push_back(s.get<std::string>());
      }
    }
    return Status();
  }

  Result<WeightMatrix> matrix(const WeightStore& store, const std::string& name, int64_t n,
                              int64_t k) const override {
    const std::string module = hf_module_name(name);
    bool dense = name == "output";
    for (const std::string& m : ignored_) dense = dense || module.find(m) != std::string::npos;
    if (dense) return dense_matrix(store, name, n, k, "fp8");
    const TensorView* w = store.find(name);
    WeightMatrix m = quantized_matrix(name, WeightFormat::kFp8, DType::kF8E4M3, n, k,
                                      w != nullptr ? *w : TensorView{});
    WeightQuant& q = m.quant;
    q.bits = 8;
    q.input_scale = part(store, name, "input_scale");
    if (block_rows_ > 0) {
      q.granularity = ScaleGranularity::kBlock;
      q.block_rows = static_cast<int32_t>(block_rows_);
      q.block_cols = static_cast<int32_t>(block_cols_);
      q.scales = part(store, name, "weight_scale_inv");
      if (q.scales.data == nullptr && q.scales.ndim == 0)
        return missing_part(name, "fp8", source_,
                            "weight_scale_inv (the block scales weight_block_size implies)");
    } else {
      q.scales = part(store, name, "weight_scale");
      if (q.scales.data == nullptr && q.scales.ndim == 0)
        return missing_part(name, "fp8", source_, "weight_scale");
      q.granularity =
          q.scales.numel() == 1 ? ScaleGranularity::kTensor : ScaleGranularity::kChannel;
    }
    if (static_activations_ && q.input_scale.data == nullptr)
      return missing_part(name, "fp8", source_, "input_scale (activation_scheme is \"static\")");
    return checked(std::move(m), "fp8");
  }

 private:
  std::string source_;
  bool static_activations_ = false;
  int64_t block_rows_ = 0, block_cols_ = 0;
  std::vector<std::string> ignored_;
};

}  // namespace

Result<std::unique_ptr<WeightScheme>> make_fp8_scheme(const CheckpointQuant& quant) {
  auto s = std::make_unique<Fp8Scheme>();
  LATHE_RETURN_IF_ERROR(s->init(quant));
  return std::unique_ptr<WeightScheme>(std::move(s));
}

}  // namespace lathe
