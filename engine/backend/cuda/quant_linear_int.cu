// The quantized linear kernels for integer codes, FP8 and dense rows (quant_linear.h).
#include "engine/backend/cuda/quant_dispatch.h"
#include "engine/backend/cuda/quant_gemv_rows.cuh"
#include "engine/backend/cuda/quant_gemv_stream.cuh"
#include "engine/backend/cuda/quant_gemv_tiles.cuh"
#include "engine/backend/cuda/quant_kernels.cuh"

namespace lathe::cuda::quant {
namespace {

// One tiled part's product at batch m <= 8 on the streaming kernel, two adjacent tiles per task
// (stored at y[mi * ldy + row_offset + r], or with kResidualAdd added to the f32 residual y);
// false when that kernel does not take it (the caller runs the tile kernel).
bool try_stream_one_part(const QuantPart& p, DType act, const void* x, DType out_dtype, void* y,
                         int64_t ldy, int64_t m, GemvOutput output, cudaStream_t stream,
                         cudaError_t* err) {
  TileLaunch L;
  if (m > 8 || !stream_kernel_takes(&p, 1, m) || !adjacent_tile_plan(p, &L.plan)) return false;
  L.parts[0] = p;
  L.output = output;
  L.out.y = y;
  L.ldy = ldy;
  L.out_f32 = out_dtype == DType::kF32;
  *err = launch_gemv_stream(L, act, x, m, stream);
  return true;
}

}  // namespace

cudaError_t gemv_other(int kind, const QuantPart& p, DType act, const void* x, DType out_dtype,
                       void* y, int64_t ldy, int64_t m, cudaStream_t stream) {
  switch (kind) {
    case kInt4:
      if (!p.one_row_gemv && tiles_kernel_takes(p)) {
        cudaError_t err = cudaSuccess;
        if (try_stream_one_part(p, act, x, out_dtype, y, ldy, m, GemvOutput::kStore, stream, &err))
          return err;
        return launch_gemv_tiles(p, act, x, out_dtype, y, ldy, m, stream);
      }
      if (kquant_takes(kind, p)) return gemv_kquant(kind, p, act, x, out_dtype, y, ldy, m, stream);
      if (!p.one_row_gemv && rows_kernel_takes<kInt4>(p))
        return launch_gemv_rows<kInt4>(p, act, x, out_dtype, y, ldy, m, stream);
      return launch_gemv<kInt4>(p, act, x, out_dtype, y, ldy, m, stream);
    case kInt8:
      if (!p.one_row_gemv && rows_kernel_takes<kInt8>(p))
        return launch_gemv_rows<kInt8>(p, act, x, out_dtype, y, ldy, m, stream);
      return launch_gemv<kInt8>(p, act, x, out_dtype, y, ldy, m, stream);
    case kFp8:
      if (!p.one_row_gemv && rows_kernel_takes<kFp8>(p))
        return launch_gemv_rows<kFp8>(p, act, x, out_dtype, y, ldy, m, stream);
      return launch_gemv<kFp8>(p, act, x, out_dtype, y, ldy, m, stream);
    case kDenseAct:
      return launch_gemv<kDenseAct>(p, act, x, out_dtype, y, ldy, m, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

bool tile_pairs_fit(const QuantPart& p, int64_t m, bool norm) {
  return tile_smem_bytes(8, 2, p.k / p.group_size) + (norm ? tile_norm_bytes<__half>(m, p.k) : 0) <=
         kTileMaxSmem;
}

cudaError_t gemv_residual_add(const QuantPart& p, DType act, const void* x, float* residual,
                              int64_t ldr, int64_t m, cudaStream_t stream) {
  cudaError_t err = cudaSuccess;
  if (try_stream_one_part(p, act, x, DType::kF32, residual, ldr, m, GemvOutput::kResidualAdd,
                          stream, &err))
    return err;
  return launch_gemv_tiles(p, act, x, DType::kF32, residual, ldr, m, stream,
                           GemvOutput::kResidualAdd);
}

cudaError_t gemv_tile_pairs(const QuantPart* parts, const TilePlan& plan, DType act, const void* x,
                            DType out_dtype, void* y, int64_t n, int64_t m, GemvOutput output,
                            const GemvRopeKv& rope, const TileNormInput* norm,
                            cudaStream_t stream) {
  TileLaunch L;
  if (norm != nullptr) L.norm = *norm;
  for (int i = 0; i < plan.nparts; ++i) L.parts[i] = parts[i];
  L.plan = plan;
  L.output = output;
  L.out = pair_out(output, y, n, rope);
  L.ldy = n;
  L.out_f32 = out_dtype == DType::kF32;
  if (stream_kernel_takes(parts, plan.nparts, m)) return launch_gemv_stream(L, act, x, m, stream);
  return launch_gemv_tile_pairs(L, act, x, m, stream);
}

cudaError_t dequantize_other(int kind, const QuantPart& p, DType act, void* out, int64_t r0,
                             int64_t r1, cudaStream_t stream) {
  switch (kind) {
    case kInt4:
      return launch_dequantize<kInt4>(p, act, out, r0, r1, stream);
    case kInt8:
      return launch_dequantize<kInt8>(p, act, out, r0, r1, stream);
    case kFp8:
      return launch_dequantize<kFp8>(p, act, out, r0, r1, stream);
    case kDenseAct:
      return launch_dequantize<kDenseAct>(p, act, out, r0, r1, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace lathe::cuda::quant

namespace lathe::cuda {

bool quant_gemv_takes(const QuantPart& p, int64_t m) {
  if (m <= kQuantGemvMaxM) return true;
  return m <= kTileMaxM && !p.one_row_gemv && p.format == WeightFormat::kInt && p.bits == 4 &&
         quant::tiles_kernel_takes(p);
}

}  // namespace lathe::cuda
