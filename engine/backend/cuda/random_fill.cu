#include <cmath>

#include "engine/backend/cuda/cuda_common.h"
#include "engine/backend/cuda/kernel_utils.cuh"
#include "engine/backend/cuda/random_fill.h"
#include "engine/core/philox.h"
#include "engine/core/strings.h"

namespace lathe::cuda {
namespace {

template <typename D>
__global__ void random_fill_kernel(D* __restrict__ dst, int64_t n, int64_t offset, float half_width,
                                   uint64_t seed, uint64_t stream_id) {
  const int64_t first_counter = offset / 4;
  const int64_t last_counter = (offset + n - 1) / 4;
  for (int64_t c = first_counter + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       c <= last_counter; c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const Philox4 r = philox4x32_10(
        static_cast<uint32_t>(c), static_cast<uint32_t>(static_cast<uint64_t>(c) >> 32),
        static_cast<uint32_t>(stream_id), static_cast<uint32_t>(stream_id >> 32),
        static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t i = 4 * c + j - offset;
      if (i < 0 || i >= n) continue;
      const float u = __fmul_rn(static_cast<float>(r.v[j] >> 8), 1.0f / 16777216.0f);
      const float value = __fmul_rn(__fsub_rn(__fmul_rn(2.0f, u), 1.0f), half_width);
      dst[i] = from_float<D>(__bfloat162float(__float2bfloat16_rn(value)));
    }
  }
}

template <typename D>
__global__ void constant_fill_kernel(D* __restrict__ dst, int64_t n, float value) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[i] = from_float<D>(value);
}

__global__ void random_bytes_kernel(uint32_t* __restrict__ dst, int64_t words, uint32_t and_mask,
                                    uint64_t seed, uint64_t stream_id) {
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < words;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const Philox4 r = philox4x32_10(
        static_cast<uint32_t>(c), static_cast<uint32_t>(static_cast<uint64_t>(c) >> 32),
        static_cast<uint32_t>(stream_id), static_cast<uint32_t>(stream_id >> 32),
        static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
    dst[c] = r.v[0] & and_mask;
  }
}

struct BlockPattern {
  uint8_t bytes[kMaxBlockPattern];
};

__global__ void block_pattern_kernel(uint8_t* __restrict__ dst, int64_t blocks, int32_t block_bytes,
                                     int32_t offset, BlockPattern pattern, int32_t len) {
  for (int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; b < blocks;
       b += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint8_t* p = dst + b * block_bytes + offset;
    for (int i = 0; i < len; ++i) p[i] = pattern.bytes[i];
  }
}

int grid_for(int64_t n) {
  return static_cast<int>(std::min<int64_t>(ceil_div(n, 256), 8192));
}

}  // namespace

Status random_fill(DType dtype, void* dst, int64_t n, int64_t element_offset, float std,
                   uint64_t seed, uint64_t stream_id, cudaStream_t stream) {
  if (n <= 0) return Status();
  // The CPU computes std * sqrt(3) in float: std::sqrt(3.0f) rounded, then the product rounded.
  const float half_width = std * std::sqrt(3.0f);
  const int blocks = grid_for(ceil_div(n, 4) + 1);
  switch (dtype) {
    case DType::kBF16:
      random_fill_kernel<<<blocks, 256, 0, stream>>>(static_cast<__nv_bfloat16*>(dst), n,
                                                     element_offset, half_width, seed, stream_id);
      break;
    case DType::kF16:
      random_fill_kernel<<<blocks, 256, 0, stream>>>(static_cast<__half*>(dst), n, element_offset,
                                                     half_width, seed, stream_id);
      break;
    case DType::kF32:
      random_fill_kernel<<<blocks, 256, 0, stream>>>(static_cast<float*>(dst), n, element_offset,
                                                     half_width, seed, stream_id);
      break;
    default:
      return invalid_argument("random_fill: dtype must be bf16, f16 or f32");
  }
  return check_launch("random_fill_kernel");
}

Status random_bytes(void* dst, int64_t bytes, uint8_t and_mask, uint64_t seed, uint64_t stream_id,
                    cudaStream_t stream) {
  if (bytes <= 0) return Status();
  if (bytes % 4 != 0 || reinterpret_cast<uintptr_t>(dst) % 4 != 0)
    return invalid_argument("random_bytes: a whole number of aligned 4-byte words");
  const uint32_t mask = 0x01010101u * and_mask;
  random_bytes_kernel<<<grid_for(bytes / 4), 256, 0, stream>>>(static_cast<uint32_t*>(dst),
                                                               bytes / 4, mask, seed, stream_id);
  return check_launch("random_bytes_kernel");
}

Status block_pattern_fill(void* dst, int64_t blocks, int32_t block_bytes, int32_t offset,
                          const uint8_t* bytes, int32_t len, cudaStream_t stream) {
  if (blocks <= 0) return Status();
  if (len < 0 || len > kMaxBlockPattern || offset < 0 || offset + len > block_bytes)
    return invalid_argument(strformat(
        "block_pattern_fill: bytes [%d, %d) do not lie in a block of %d (at most %d bytes)", offset,
        offset + len, block_bytes, kMaxBlockPattern));
  BlockPattern pattern{};
  for (int i = 0; i < len; ++i) pattern.bytes[i] = bytes[i];
  block_pattern_kernel<<<grid_for(blocks), 256, 0, stream>>>(static_cast<uint8_t*>(dst), blocks,
                                                             block_bytes, offset, pattern, len);
  return check_launch("block_pattern_kernel");
}

Status constant_fill(DType dtype, void* dst, int64_t n, float value, cudaStream_t stream) {
  if (n <= 0) return Status();
  switch (dtype) {
    case DType::kBF16:
      constant_fill_kernel<<<grid_for(n), 256, 0, stream>>>(static_cast<__nv_bfloat16*>(dst), n,
                                                            value);
      break;
    case DType::kF16:
      constant_fill_kernel<<<grid_for(n), 256, 0, stream>>>(static_cast<__half*>(dst), n, value);
      break;
    case DType::kF32:
      constant_fill_kernel<<<grid_for(n), 256, 0, stream>>>(static_cast<float*>(dst), n, value);
      break;
    default:
      return invalid_argument("constant_fill: dtype must be bf16, f16 or f32");
  }
  return check_launch("constant_fill_kernel");
}

}  // namespace lathe::cuda
