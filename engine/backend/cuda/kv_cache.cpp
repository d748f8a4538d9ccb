#include "engine/backend/cuda/kv_cache.h"

#include <string>

namespace lathe::cuda {

int64_t KvLayout::elem_bytes() const {
  return dtype_info(dtype).block_bytes / dtype_info(dtype).block_size;
}

Status CudaKvCache::allocate(const KvLayout& layout, const char* what, cudaStream_t stream) {
  reset();
  LATHE_RETURN_IF_ERROR(buffer_.allocate(layout.bytes(), what));
  LATHE_CUDA_TRY(cudaMemsetAsync(buffer_.get(), 0, static_cast<size_t>(layout.bytes()), stream));
  layout_ = layout;
  return Status();
}

void CudaKvCache::reset() {
  buffer_.reset();
  layout_.num_blocks = 0;
}

KvLayerView CudaKvCache::layer(int64_t index) const {
  const int64_t half = layout_.layer_elems() * layout_.elem_bytes();
  uint8_t* k = buffer_.as<uint8_t>() + 2 * index * half;
  return KvLayerView{k, k + half, layout_.dtype, layout_.block_size};
}

Status check_kv_dtype(const char* kernel, DType act, DType kv) {
  if (act == kv) return Status();
  return unsupported(std::string(kernel) + " reads a KV cache of the activation type (" +
                     std::string(dtype_name(act)) + "); this cache holds " +
                     std::string(dtype_name(kv)));
}

}  // namespace lathe::cuda
