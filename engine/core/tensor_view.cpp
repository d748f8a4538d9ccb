#include "engine/core/tensor_view.h"

namespace lathe {

int64_t TensorView::row_bytes() const {
  const DTypeInfo& info = dtype_info(dtype);
  return row_elems() / info.block_size * info.block_bytes;
}

std::string TensorView::shape_string() const {
  std::string s = "[";
  for (int i = 0; i < ndim; ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

TensorView make_view(DType dtype, std::initializer_list<int64_t> shape, const void* data) {
  TensorView v;
  v.dtype = dtype;
  v.data = data;
  for (int64_t d : shape) v.shape[v.ndim++] = d;
  return v;
}

}  // namespace lathe
