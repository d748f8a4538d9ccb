#include "engine/model/weight_store.h"

#include "engine/core/strings.h"

namespace lathe {

uint8_t* WeightStore::own(std::vector<uint8_t> buffer) {
  owned_.push_back(std::make_unique<std::vector<uint8_t>>(std::move(buffer)));
  return owned_.back()->data();
}

const TensorView* WeightStore::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

Result<TensorView> WeightStore::get(const std::string& name,
                                    std::initializer_list<int64_t> expected_shape) const {
  const TensorView* t = find(name);
  if (t == nullptr) return not_found("tensor '" + name + "' is missing from the model files");
  TensorView want = make_view(t->dtype, expected_shape, nullptr);
  bool same = want.ndim == t->ndim;
  for (int i = 0; same && i < t->ndim; ++i) same = want.shape[i] == t->shape[i];
  if (!same)
    return corrupt_file("tensor '" + name + "' has shape " + t->shape_string() + ", expected " +
                        want.shape_string() + " from the model config");
  return *t;
}

int64_t WeightStore::total_bytes() const {
  int64_t n = 0;
  for (const auto& [name, t] : tensors_) n += t.nbytes();
  return n;
}

}  // namespace lathe
