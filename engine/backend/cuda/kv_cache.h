// The paged KV cache on the GPU: its tensors and the one layout descriptor every attention kernel
// and KV writer reads. Per layer, K then V, each [num_blocks, block_size, num_kv_heads, head_dim]
// of the cache's own dtype: the KV dtype is a property of the cache, not of the activations. Today
// the kernels take a cache of the activation dtype (bf16/f16) and refuse another with an error
// that names both; an FP8 cache is a new layout dtype plus kernels that read it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/backend/cuda/cuda_common.h"
#include "engine/core/dtype.h"
#include "engine/core/status.h"

namespace lathe::cuda {

struct KvLayout {
  DType dtype = DType::kBF16;
  int32_t num_layers = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t block_size = 16;  // tokens per block
  int32_t num_blocks = 0;

  int64_t elem_bytes() const;  // 2 for bf16/f16, 1 for 8-bit types
  // Elements of one layer's K (or V): num_blocks * block_size * num_kv_heads * head_dim.
  int64_t layer_elems() const { return int64_t{num_blocks} * block_size * num_kv_heads * head_dim; }
  // Bytes of one block over all layers, K and V.
  int64_t block_bytes() const {
    return 2 * int64_t{num_layers} * block_size * num_kv_heads * head_dim * elem_bytes();
  }
  int64_t bytes() const { return block_bytes() * num_blocks; }
};

// One layer of the cache as the kernels address it.
struct KvLayerView {
  void* k = nullptr;
  void* v = nullptr;
  DType dtype = DType::kBF16;
  int32_t block_size = 16;
};

class CudaKvCache {
 public:
  // Allocates `layout` and zeroes it on `stream` (a partly filled last page is loaded whole by the
  // tiled kernels and masked, so it must not hold NaN bit patterns). Frees what was there first.
  Status allocate(const KvLayout& layout, const char* what, cudaStream_t stream);
  void reset();

  const KvLayout& layout() const { return layout_; }
  KvLayerView layer(int64_t index) const;
  bool empty() const { return buffer_.get() == nullptr; }
  DeviceBuffer& buffer() { return buffer_; }
  const DeviceBuffer& buffer() const { return buffer_; }

 private:
  KvLayout layout_;
  DeviceBuffer buffer_;
};

// The refusal of a kernel that reads a cache of `kv` with activations of `act` ("decode
// attention", ...) when the two differ.
Status check_kv_dtype(const char* kernel, DType act, DType kv);

}  // namespace lathe::cuda
