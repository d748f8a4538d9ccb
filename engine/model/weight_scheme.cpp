#include "engine/model/weight_scheme.h"

#include "engine/model/loaded_model.h"

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

Result<std::unique_ptr<WeightScheme>> select_weight_scheme(const LoadedModel& model) {
  (void)model;  // every checkpoint the loaders accept today stores its weights as tensors
  return make_dense_scheme();
}

}  // namespace lathe
