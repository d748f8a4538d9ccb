// The k-quant decode kernel's launches (quant_gemv_kquants.cuh) for quant_linear.cpp: one stored
// part, or a projection's parts with an epilogue as quant_linear.cpp plans them. Instantiated here
// for Q4_K, Q5_K, Q6_K and kInt4 (the unit layout's kinds in quant_linear_kquants_units.cu), both
// activation types, one or two activation rows per launch with kStore and one with the epilogues
// (quant_linear.cpp takes the epilogues at batch 1 only).
#include "engine/backend/cuda/quant_dispatch.h"
#include "engine/backend/cuda/quant_gemv_kquants.cuh"

namespace lathe::cuda::quant {
namespace {

template <GemvOutput OUT>
cudaError_t launch_kind(int kind, const KqLaunch& L, DType act, const void* x, int64_t m,
                        cudaStream_t stream) {
  switch (kind) {
    case kQ4K:
      return launch_kquants<kQ4K, OUT>(L, act, x, m, stream);
    case kQ5K:
      return launch_kquants<kQ5K, OUT>(L, act, x, m, stream);
    case kQ6K:
      return launch_kquants<kQ6K, OUT>(L, act, x, m, stream);
    case kInt4:
      return launch_kquants<kInt4, OUT>(L, act, x, m, stream);
    default:
      return launch_kquants_units<OUT>(kind, L, act, x, m, stream);
  }
}

}  // namespace

bool kquant_takes(int kind, const QuantPart& p) {
  if (kind == kInt4) {  // 4-bit integer rows, group 32, symmetric, f16 scales (GGUF Q4_0 repacked)
    if (p.format != WeightFormat::kInt || p.int4_tiles || p.group_size != 32 ||
        p.zeros != nullptr || p.g_idx != nullptr || p.scale_dtype != DType::kF16 ||
        reinterpret_cast<uintptr_t>(p.scales) % 4 != 0)
      return false;
  } else if (kind == kQ4_1 || kind == kQ5_0 || kind == kQ5_1 || kind == kQ2K || kind == kQ3K) {
    // The unit layout (gguf_units.h): scales read 8 bytes (Q2_K, Q3_K: 2 or 4) at a time, aux 8.
    if (p.format != WeightFormat::kGguf || !p.gguf_units ||
        reinterpret_cast<uintptr_t>(p.scales) % 8 != 0 ||
        reinterpret_cast<uintptr_t>(p.gguf_aux) % 8 != 0 ||
        ((kind == kQ5_0 || kind == kQ5_1 || kind == kQ3K) && p.gguf_aux == nullptr))
      return false;
  } else if (kind != kQ4K && kind != kQ5K && kind != kQ6K) {
    return false;
  }
  if (kind == kQ6K && !p.gguf_q6k_split) return false;
  if (kind == kQ5K && !p.gguf_q5k_units) return false;
  // Rows of whole 64-weight units (pairs of 32-weight blocks) or 256-weight super-blocks.
  const bool pairs = kind == kInt4 || kind == kQ4_1 || kind == kQ5_0 || kind == kQ5_1;
  return !p.one_row_gemv && p.k % (pairs ? 64 : 256) == 0 && p.k < (int64_t{1} << 30) &&
         p.n < (int64_t{1} << 30) && reinterpret_cast<uintptr_t>(p.data) % 16 == 0 &&
         kquant_smem_bytes(kKquantMaxM, p.k) <= 200 * 1024;
}

cudaError_t gemv_kquant(int kind, const QuantPart& p, DType act, const void* x, DType out_dtype,
                        void* y, int64_t ldy, int64_t m, cudaStream_t stream) {
  KqLaunch L;
  L.parts[0] = p;
  L.nparts = 1;
  L.row_begin = static_cast<int32_t>(p.row_offset);
  L.row_end = static_cast<int32_t>(p.row_offset + p.n);
  L.task_end = static_cast<int32_t>((p.n + 1) / 2);
  L.out.y = y;
  L.ldy = ldy;
  L.out_f32 = out_dtype == DType::kF32;
  return launch_kind<GemvOutput::kStore>(kind, L, act, x, m, stream);
}

cudaError_t gemv_kquant_parts(const QuantPart* parts, const KquantPlan& plan, DType act,
                              const void* x, DType out_dtype, void* y, int64_t n, int64_t m,
                              GemvOutput output, const GemvRopeKv& rope, cudaStream_t stream,
                              const TileNormInput* norm) {
  if ((output != GemvOutput::kStore || norm != nullptr) && m != 1) return cudaErrorInvalidValue;
  for (int i = 0; i < plan.nranges; ++i) {
    const KquantRange& r = plan.ranges[i];
    KqLaunch L;
    for (int j = 0; j < r.nparts; ++j) L.parts[j] = parts[r.first_part + j];
    L.nparts = r.nparts;
    L.task_begin = r.task_begin;
    L.task_end = r.task_end;
    L.row_begin = r.row_begin;
    L.row_end = r.row_end;
    L.out = pair_out(output, y, n, rope);
    L.ldy = n;
    L.out_f32 = out_dtype == DType::kF32;
    if (norm != nullptr) L.norm = *norm;
    cudaError_t err = cudaErrorInvalidValue;
    switch (output) {
      case GemvOutput::kStore:
        err = launch_kind<GemvOutput::kStore>(r.kind, L, act, x, m, stream);
        break;
      case GemvOutput::kResidualAdd:
        err = launch_kind<GemvOutput::kResidualAdd>(r.kind, L, act, x, m, stream);
        break;
      case GemvOutput::kSwiglu:
        err = launch_kind<GemvOutput::kSwiglu>(r.kind, L, act, x, m, stream);
        break;
      case GemvOutput::kRopeKv:
        err = launch_kind<GemvOutput::kRopeKv>(r.kind, L, act, x, m, stream);
        break;
    }
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace lathe::cuda::quant
