// The launchers of quant_linear_gguf.cu and quant_linear_int.cu by storage kind (quant_decode.cuh's
// quant::Kind), for quant_linear.cpp. Internal to the CUDA backend.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/backend/cuda/gemv_epilogue.h"
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

// The k-quant decode kernel (quant_gemv_kquants.cuh) on Q4_K, Q5_K and split Q6_K parts, 4-bit
// integer rows of group 32 (Q4_0 repacked) and the unit layout's Q4_1, Q5_0, Q5_1, Q2_K, Q3_K.
constexpr int kKquantMaxM = 2;  // activation rows per launch (larger batches run in slabs)
// Dynamic shared memory of a launch: m rows of k staged activations (padded: k + k / 16 floats)
// and their sums per 16 inputs.
inline size_t kquant_smem_bytes(int64_t m, int64_t k) {
  return static_cast<size_t>(m * (k + k / 16) + m * (k / 16)) * sizeof(float);
}
// Whether the kernel takes part p (kind: kind_of(p)).
bool kquant_takes(int kind, const QuantPart& p);

// The launches of a projection's k-quant parts with an output (gemv_epilogue.h): each a run of
// parts of one kind, the output tasks [task_begin, task_end) (kStore / kResidualAdd: task t holds
// rows row_begin + 2 t and + 1) and rows [row_begin, row_end) they read.
struct KquantRange {
  int kind = -1;
  int first_part = 0, nparts = 0;
  int32_t task_begin = 0, task_end = 0, row_begin = 0, row_end = 0;
};
constexpr int kKquantMaxParts = 3;                     // parts per launch
constexpr int kKquantMaxRanges = 2 * kKquantMaxParts;  // launches per projection
struct KquantPlan {
  KquantRange ranges[kKquantMaxRanges];
  int nranges = 0;
};

// The kernel's per-unit arithmetic run on the host (quant_kquants_host.cu), for tests without a
// GPU: y[mi, r] (row stride p.n) = row r of part p (host pointers, as uploaded) against x[mi, :]
// (f32 [m, k], m <= kKquantMaxM), units summed in order. false when the kernel does not take p.
bool kquant_rows_on_host(int kind, const QuantPart& p, const float* x, int64_t m, float* y);
// The generic kernels' decoding of a unit-layout part (gguf_units.h; quant_decode_units.cuh) run on
// the host: out [n, k] f32. false when p is not in the unit layout.
bool gguf_units_rows_on_host(int kind, const QuantPart& p, float* out);

cudaError_t gemv_kquant_parts(const QuantPart* parts, const KquantPlan& plan, DType act,
                              const void* x, DType out_dtype, void* y, int64_t n, int64_t m,
                              GemvOutput output, const GemvRopeKv& rope, cudaStream_t stream,
                              const TileNormInput* norm);
// One part, stored (quant_gemv): y[mi * ldy + row_offset + r].
cudaError_t gemv_kquant(int kind, const QuantPart& p, DType act, const void* x, DType out_dtype,
                        void* y, int64_t ldy, int64_t m, cudaStream_t stream);

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
