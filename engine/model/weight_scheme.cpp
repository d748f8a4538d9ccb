#include "engine/model/weight_scheme.h"

#include <regex>

#include "engine/core/strings.h"
#include "engine/model/loaded_model.h"
#include "engine/model/tensor_names.h"
#include "engine/model/weight_dequant.h"

namespace lathe {
namespace {

class DenseScheme final : public WeightScheme {
 public:
  const char* name() const override { return "dense"; }
  Result<WeightMatrix> matrix(const WeightStore& store, const std::string& name, int64_t n,
                              int64_t k) const override {
    LATHE_ASSIGN_OR_RETURN(TensorView t, store.get(name, {n, k}));
    return plain_matrix(name, t);
  }
};

}  // namespace

std::unique_ptr<WeightScheme> make_dense_scheme() {
  return std::make_unique<DenseScheme>();
}

Result<std::shared_ptr<const WeightScheme>> select_weight_scheme(const LoadedModel& model) {
  const CheckpointQuant& q = model.quantization;
  std::unique_ptr<WeightScheme> scheme;
  if (!q.quantized()) {
    scheme = make_dense_scheme();
  } else if (q.method == "gptq") {
    LATHE_ASSIGN_OR_RETURN(scheme, make_gptq_scheme(q, model.config, model.weights));
  } else if (q.method == "awq") {
    LATHE_ASSIGN_OR_RETURN(scheme, make_awq_scheme(q));
  } else if (q.method == "compressed-tensors") {
    LATHE_ASSIGN_OR_RETURN(scheme, make_compressed_tensors_scheme(q));
  } else if (q.method == "fp8") {
    LATHE_ASSIGN_OR_RETURN(scheme, make_fp8_scheme(q));
  } else {
    return unsupported(q.source + ": quant_method '" + q.method +
                       "' is not supported; Lathe reads " + supported_quant_methods() +
                       " checkpoints");
  }
  if (model.online_quantization != OnlineQuant::kNone)
    scheme = make_online_quant_scheme(model.online_quantization, std::move(scheme));
  return std::shared_ptr<const WeightScheme>(std::move(scheme));
}

namespace scheme_detail {

std::string hf_module_name(const std::string& canonical) {
  std::string hf = hf_name_from_canonical(canonical);
  if (ends_with(hf, ".weight")) hf.resize(hf.size() - 7);
  return hf;
}

TensorView part(const WeightStore& store, const std::string& canonical, const char* part) {
  const TensorView* t = store.find(canonical + "." + part);
  return t != nullptr ? *t : TensorView{};
}

bool has_part(const WeightStore& store, const std::string& canonical, const char* part) {
  return store.contains(canonical + "." + part);
}

Result<WeightMatrix> dense_matrix(const WeightStore& store, const std::string& name, int64_t n,
                                  int64_t k, const std::string& scheme) {
  const std::string module = hf_module_name(name);
  const TensorView* t = store.find(name);
  if (t == nullptr)
    return not_found(name + " (" + module + "): the " + scheme +
                     " config leaves this module unquantized, but the checkpoint has no plain '" +
                     module + ".weight'");
  if (!(t->dtype == DType::kF32 || t->dtype == DType::kF16 || t->dtype == DType::kBF16))
    return corrupt_file(name + " (" + module + "): the " + scheme +
                        " config leaves this module unquantized, but its weight is stored as " +
                        std::string(dtype_name(t->dtype)) + " (expected f32, f16 or bf16)");
  LATHE_ASSIGN_OR_RETURN(TensorView v, store.get(name, {n, k}));
  return plain_matrix(name, v);
}

Result<bool> regex_match_prefix(const std::string& pattern, const std::string& text,
                                const std::string& where) {
  try {
    const std::regex re(pattern, std::regex::ECMAScript);
    return std::regex_search(text, re, std::regex_constants::match_continuous);
  } catch (const std::regex_error& e) {
    return invalid_argument(where + ": '" + pattern + "' is not a regular expression Lathe can " +
                            "read (" + e.what() + ")");
  }
}

WeightMatrix quantized_matrix(const std::string& name, WeightFormat format, DType dtype, int64_t n,
                              int64_t k, const TensorView& data) {
  WeightMatrix m;
  m.name = name;
  m.format = format;
  m.dtype = dtype;
  m.n = n;
  m.k = k;
  m.data = data;
  return m;
}

Status missing_part(const std::string& name, const std::string& scheme, const std::string& source,
                    const std::string& what) {
  const std::string module = hf_module_name(name);
  return corrupt_file(name + " (" + module + "): the " + scheme + " config (" + source +
                      ") quantizes this module, but the checkpoint has no " + module + "." + what +
                      "; the checkpoint does not match its quantization config");
}

Result<WeightMatrix> checked(WeightMatrix m, const char* scheme) {
  m.scheme = scheme;
  LATHE_RETURN_IF_ERROR(validate_weight_matrix(m));
  return m;
}

}  // namespace scheme_detail

}  // namespace lathe
