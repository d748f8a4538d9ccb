// Seeded random weights generated on the device (`--load-format dummy`), identical to the CPU
// backend's cpu::make_random_matrix for the same (seed, stream): element i draws word i % 4 of
// philox4x32_10(counter = i / 4, key = seed) with the stream id in the counter's upper words,
// u = (word >> 8) / 2^24 in [0, 1), value = (2u - 1) * std * sqrt(3), rounded to bf16 first (the
// CPU's storage type) and then to `dtype`. So the CPU and CUDA runners of one dummy config compute
// with the same weights. `element_offset` places a part of a tensor: dst[j] is element
// element_offset + j of the stream.
// Also fills constant vectors (norm weights of 1, biases of 0).
// Launch: grid-stride, 256 threads, 4 elements per thread per Philox call.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/core/dtype.h"
#include "engine/core/status.h"

namespace lathe::cuda {

// dtype: bf16, f16 or f32 (f32 keeps the bf16-rounded value exactly).
Status random_fill(DType dtype, void* dst, int64_t n, int64_t element_offset, float std,
                   uint64_t seed, uint64_t stream_id, cudaStream_t stream);

// Random bytes (quantized dummy weights: codes of a format), each ANDed with `and_mask` (FP8 E4M3
// codes use 0xBF so that no byte is a NaN). `bytes` a multiple of 4, `dst` 4-byte aligned.
Status random_bytes(void* dst, int64_t bytes, uint8_t and_mask, uint64_t seed, uint64_t stream_id,
                    cudaStream_t stream);

// In each of `blocks` consecutive blocks of `block_bytes` bytes at dst, bytes [offset, offset +
// len) are set to bytes[0, len) (len <= kMaxBlockPattern; the constant d / scale fields of dummy
// GGUF blocks, engine/model/dummy_gguf.h). Any alignment. One thread per block.
constexpr int kMaxBlockPattern = 20;
Status block_pattern_fill(void* dst, int64_t blocks, int32_t block_bytes, int32_t offset,
                          const uint8_t* bytes, int32_t len, cudaStream_t stream);

// dst[i] = value for i < n, dtype f32, f16 or bf16.
Status constant_fill(DType dtype, void* dst, int64_t n, float value, cudaStream_t stream);

}  // namespace lathe::cuda
