// The launchers of quant_linear_gguf.cu and quant_linear_int.cu by storage kind (quant_decode.cuh's
// quant::Kind), for quant_linear.cpp. Internal to the CUDA backend.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/backend/cuda/quant_linear.h"
#include "engine/backend/cuda/quant_tile_plan.h"

namespace lathe::cuda::quant {

// The storage kinds the kernels are instantiated for; the GGUF block types are kQ8_0..kQ6K.
enum Kind : int {
  kQ8_0,
  kQ4_0,
  kQ4_1,
  kQ5_0,
  kQ5_1,
  kQ2K,
  kQ3K,
  kQ4K,
  kQ5K,
  kQ6K,
  kInt4,
  kInt8,
  kFp8,
  kDenseAct,
};

cudaError_t gemv_gguf(int kind, const QuantPart& p, DType act, const void* x, DType out_dtype,
                      void* y, int64_t ldy, int64_t m, cudaStream_t stream);
cudaError_t dequantize_gguf(int kind, const QuantPart& p, DType act, void* out, int64_t r0,
                            int64_t r1, cudaStream_t stream);
cudaError_t gemv_other(int kind, const QuantPart& p, DType act, const void* x, DType out_dtype,
                       void* y, int64_t ldy, int64_t m, cudaStream_t stream);
// The parts of `plan` in one launch of the tile kernel, two tiles per block (m <= 8), `output` on
// the projection's product (y: [m, n] rows of the projection, row stride n).
cudaError_t gemv_tile_pairs(const QuantPart* parts, const TilePlan& plan, DType act, const void* x,
                            DType out_dtype, void* y, int64_t n, int64_t m, GemvOutput output,
                            const GemvRopeKv& rope, const TileNormInput* norm, cudaStream_t stream);
// Whether two tiles of this part's shape fit the tile kernel's shared memory (norm: with the
// normalized activations of m rows).
bool tile_pairs_fit(const QuantPart& p, int64_t m, bool norm);
// The one-tile kernel with the residual-add epilogue (quant_gemv_residual_add).
cudaError_t gemv_residual_add(const QuantPart& p, DType act, const void* x, float* residual,
                              int64_t ldr, int64_t m, cudaStream_t stream);
cudaError_t dequantize_other(int kind, const QuantPart& p, DType act, void* out, int64_t r0,
                             int64_t r1, cudaStream_t stream);

}  // namespace lathe::cuda::quant
