// quant_gemm_int4 (quant_linear.h): the launch plan of quant_gemm_tiles.cuh's kernel.
#include <algorithm>

#include "engine/backend/cuda/cuda_common.h"
#include "engine/backend/cuda/quant_gemm_tiles.cuh"
#include "engine/core/strings.h"

namespace lathe::cuda {
namespace {

template <typename T, int NB>
cudaError_t launch(const quant::GemmTilesLaunch& L, const T* x, cudaStream_t stream) {
  const size_t smem = static_cast<size_t>(quant::kGemmStages) * quant::gemm_stage_bytes(NB);
  if (smem > 48 * 1024) {
    const cudaError_t e =
        cudaFuncSetAttribute(quant::quant_gemm_tiles_kernel<T, NB>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (e != cudaSuccess) return e;
  }
  const unsigned blocks = static_cast<unsigned>(L.mblocks * L.nblocks * L.splits);
  cudaError_t err = launch_kernel(quant::quant_gemm_tiles_kernel<T, NB>, dim3(blocks),
                                  dim3(quant::kGemmWarps * 32), smem, stream, L, x);
  if (err != cudaSuccess || L.splits == 1) return err;
  const int64_t total = static_cast<int64_t>(L.m) * L.p.n;
  const unsigned rblocks = static_cast<unsigned>(std::min<int64_t>((total + 255) / 256, 4096));
  return launch_kernel(quant::quant_gemm_splits_kernel<T>, dim3(rblocks), dim3(256), 0, stream, L);
}

}  // namespace

GemmInt4Plan plan_gemm_int4(const QuantPart& p, int64_t m, int64_t workspace_bytes, int sm_count) {
  GemmInt4Plan plan;
  plan.rows_per_block = m <= 32 ? 32 : 64;
  plan.mblocks = static_cast<int>((m + plan.rows_per_block - 1) / plan.rows_per_block);
  plan.nblocks =
      static_cast<int>((p.n / kInt4TileRows + quant::kGemmBlockTiles - 1) / quant::kGemmBlockTiles);
  const int chunks = static_cast<int>(p.k / kInt4TileK);
  // Enough blocks for two waves of the machine, each split at least kGemmMinChunks chunks long,
  // and the partial sums within the workspace.
  const int64_t blocks = static_cast<int64_t>(plan.mblocks) * plan.nblocks;
  int splits = static_cast<int>(std::clamp<int64_t>((2 * sm_count + blocks - 1) / blocks, 1,
                                                    std::max(1, chunks / kGemmMinChunks)));
  while (splits > 1 && splits * m * p.n * 4 > workspace_bytes) --splits;
  plan.chunks_per_split = (chunks + splits - 1) / splits;
  plan.splits = (chunks + plan.chunks_per_split - 1) / plan.chunks_per_split;
  return plan;
}

bool quant_gemm_int4_takes(const QuantPart& p, int64_t m) {
  return m >= 1 && m <= p.int4_gemm_max_m && p.int4_tiles && !p.one_row_gemv &&
         quant_part_supported(p, nullptr);
}

Status quant_gemm_int4(const QuantPart& p, DType act, const void* x, DType out_dtype, void* y,
                       int64_t ldy, int64_t m, void* workspace, int64_t workspace_bytes,
                       cudaStream_t stream) {
  if (m <= 0) return Status();
  if (!is_act_dtype(act) || (out_dtype != act && out_dtype != DType::kF32))
    return invalid_argument("quant_gemm_int4: bf16/f16 activations, output of that type or f32");
  if (!quant_gemm_int4_takes(p, m))
    return unsupported(strformat(
        "quant_gemm_int4: a 4-bit part in the tile layout at batches of 1 to %d, got %lld",
        p.int4_gemm_max_m, static_cast<long long>(m)));
  const GemmInt4Plan plan = plan_gemm_int4(p, m, workspace != nullptr ? workspace_bytes : 0,
                                           current_device_limits().sm_count);
  quant::GemmTilesLaunch L;
  L.p = p;
  L.y = y;
  L.ldy = ldy;
  L.out_f32 = out_dtype == DType::kF32;
  L.partial = static_cast<float*>(workspace);
  L.m = static_cast<int>(m);
  L.mblocks = plan.mblocks;
  L.nblocks = plan.nblocks;
  L.splits = plan.splits;
  L.chunks_per_split = plan.chunks_per_split;
  cudaError_t err = cudaSuccess;
  LATHE_DISPATCH_ACT(act, T, {
    const T* xt = static_cast<const T*>(x);
    err = plan.rows_per_block == 32 ? launch<T, 4>(L, xt, stream) : launch<T, 8>(L, xt, stream);
  });
  if (err != cudaSuccess) return cuda_error(err, "launch of quant_gemm_tiles_kernel");
  return check_launch("quant_gemm_tiles_kernel");
}

}  // namespace lathe::cuda
