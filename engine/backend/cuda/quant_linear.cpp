#include "engine/backend/cuda/quant_linear.h"

#include "engine/backend/cuda/cuda_common.h"
#include "engine/backend/cuda/int4_tiles.h"
#include "engine/backend/cuda/quant_dispatch.h"
#include "engine/core/strings.h"

namespace lathe::cuda {
namespace {

// The kernels' storage kind of a part, or -1.
int kind_of(const QuantPart& p) {
  switch (p.format) {
    case WeightFormat::kDense:
      return quant::kDenseAct;
    case WeightFormat::kFp8:
      return quant::kFp8;
    case WeightFormat::kInt:
      return p.bits == 4 ? quant::kInt4 : (p.bits == 8 ? quant::kInt8 : -1);
    case WeightFormat::kGguf:
      switch (p.gguf_type) {
        case DType::kQ8_0:
          return quant::kQ8_0;
        case DType::kQ4_0:
          return quant::kQ4_0;
        case DType::kQ4_1:
          return quant::kQ4_1;
        case DType::kQ5_0:
          return quant::kQ5_0;
        case DType::kQ5_1:
          return quant::kQ5_1;
        case DType::kQ2_K:
          return quant::kQ2K;
        case DType::kQ3_K:
          return quant::kQ3K;
        case DType::kQ4_K:
          return quant::kQ4K;
        case DType::kQ5_K:
          return quant::kQ5K;
        case DType::kQ6_K:
          return quant::kQ6K;
        default:
          return -1;
      }
  }
  return -1;
}

bool is_gguf_kind(int kind) {
  return kind >= quant::kQ8_0 && kind <= quant::kQ6K;
}

Status check(const QuantPart& p, const char* who) {
  std::string why;
  if (!quant_part_supported(p, &why)) return unsupported(std::string(who) + ": " + why);
  return Status();
}

}  // namespace

int64_t QuantPart::bytes() const {
  switch (format) {
    case WeightFormat::kDense:
      return n * k * 2;
    case WeightFormat::kGguf:  // the split Q6_K layout has the blocks' bytes too
      return n * (k / dtype_info(gguf_type).block_size) * dtype_info(gguf_type).block_bytes;
    case WeightFormat::kInt: {
      const int64_t groups = group_size > 0 ? k / group_size : 1;
      return n * k * bits / 8 + n * groups * (scale_dtype == DType::kF32 ? 4 : 2) +
             (zeros != nullptr ? n * groups : 0) + (g_idx != nullptr ? 4 * k : 0);
    }
    case WeightFormat::kFp8: {
      int64_t s = 4;
      if (fp8_scale == ScaleGranularity::kChannel) s = 4 * n;
      if (fp8_scale == ScaleGranularity::kBlock) s = 4 * ((n + 127) / 128) * ((k + 127) / 128);
      return n * k + s;
    }
  }
  return 0;
}

bool quant_part_supported(const QuantPart& p, std::string* why) {
  auto no = [&](std::string w) {
    if (why != nullptr) *why = std::move(w);
    return false;
  };
  const int kind = kind_of(p);
  if (kind < 0) {
    if (p.format == WeightFormat::kGguf)
      return no("no CUDA kernel for GGUF " + std::string(dtype_name(p.gguf_type)) +
                " weights (supported: q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k)");
    return no(strformat("no CUDA kernel for %d-bit integer weights (4 or 8)", p.bits));
  }
  if (p.k % 32 != 0)
    return no(
        strformat("the input width %lld is not a multiple of 32", static_cast<long long>(p.k)));
  if (is_gguf_kind(kind) && p.k % dtype_info(p.gguf_type).block_size != 0)
    return no("the input width is not a whole number of GGUF blocks");
  if (p.format == WeightFormat::kInt &&
      (p.group_size <= 0 || p.group_size % 32 != 0 || p.k % p.group_size != 0 ||
       p.scales == nullptr || (p.scale_dtype != DType::kF16 && p.scale_dtype != DType::kF32)))
    return no(
        strformat("integer weights need a group size that is a multiple of 32 dividing %lld "
                  "(got %d) and scales",
                  static_cast<long long>(p.k), p.group_size));
  if (p.int4_tiles && (p.format != WeightFormat::kInt || p.bits != 4 ||
                       !int4_tiles_fit(p.n, p.k, p.group_size, p.g_idx != nullptr)))
    return no(
        "the 4-bit tile layout needs 16-row tiles, 64-input chunks, groups of a multiple of 64 "
        "and no act-order");
  if (p.format == WeightFormat::kFp8 && p.scales == nullptr) return no("FP8 weights need scales");
  if (p.data == nullptr || p.n <= 0) return no("the part holds no rows");
  return true;
}

Status quant_gemv(const QuantPart& p, DType act, const void* x, DType out_dtype, void* y,
                  int64_t ldy, int64_t m, cudaStream_t stream) {
  if (m <= 0) return Status();
  if (!is_act_dtype(act) || (out_dtype != act && out_dtype != DType::kF32))
    return invalid_argument("quant_gemv: bf16/f16 activations, output of that type or f32");
  if (!quant_gemv_takes(p, m))
    return invalid_argument(strformat("quant_gemv: at most %d rows, got %lld", kQuantGemvMaxM,
                                      static_cast<long long>(m)));
  LATHE_RETURN_IF_ERROR(check(p, "quant_gemv"));
  const int kind = kind_of(p);
  const cudaError_t err = is_gguf_kind(kind)
                              ? quant::gemv_gguf(kind, p, act, x, out_dtype, y, ldy, m, stream)
                              : quant::gemv_other(kind, p, act, x, out_dtype, y, ldy, m, stream);
  if (err != cudaSuccess) return cuda_error(err, "launch of quant_gemv_kernel");
  return check_launch("quant_gemv_kernel");
}

namespace {

// The tile-pair plan at batch m, or why not.
Result<TilePlan> tile_pairs_plan(const std::vector<QuantPart>& parts, int64_t n, int64_t m,
                                 GemvOutput output, const GemvRopeKv* rope, bool norm) {
  if (m < 1 || m > kQuantGemvMaxM)
    return unsupported(strformat("tile pairs: batches of 1 to %d rows", kQuantGemvMaxM));
  for (const QuantPart& p : parts) LATHE_RETURN_IF_ERROR(check(p, "quant_gemv_tile_pairs"));
  LATHE_ASSIGN_OR_RETURN(TilePlan plan, plan_tile_pairs(parts, n, output, rope));
  if (norm && parts[0].k % 4 != 0)
    return unsupported("tile pairs: the RMSNorm input needs k % 4 == 0");
  if (norm && m > parts[0].int4_norm_max_m)
    return unsupported(
        strformat("tile pairs: the RMSNorm input up to batch %d (LATHE_CUDA_INT4_NORM_MAX_M)",
                  parts[0].int4_norm_max_m));
  if (!quant::tile_pairs_fit(parts[0], m, norm))
    return unsupported(norm ? "tile pairs: the normalized activations do not fit in shared memory"
                            : "tile pairs: the scales of two tiles do not fit in shared memory");
  return plan;
}

}  // namespace

bool quant_tile_pairs_take(const std::vector<QuantPart>& parts, int64_t n, int64_t m,
                           GemvOutput output, const GemvRopeKv* rope, bool norm) {
  return tile_pairs_plan(parts, n, m, output, rope, norm).is_ok();
}

namespace {

// The k-quant launches of a projection (quant_dispatch.h's KquantPlan), or why not.
Result<quant::KquantPlan> kquant_plan(const std::vector<QuantPart>& parts, int64_t n, int64_t m,
                                      GemvOutput output, const GemvRopeKv* rope, bool norm) {
  if (m < 1 || m > kQuantGemvMaxM)
    return unsupported(strformat("k-quant kernel: batches of 1 to %d rows", kQuantGemvMaxM));
  if (output != GemvOutput::kStore && m != 1)
    return unsupported("k-quant kernel: the epilogues at batch 1");
  if (norm && (m != 1 || output == GemvOutput::kResidualAdd))
    return unsupported("k-quant kernel: the RMSNorm input at batch 1, not with the residual add");
  if (norm && !parts.empty() && !parts[0].kquant_norm)
    return unsupported(
        "k-quant kernel: the RMSNorm input is off (LATHE_CUDA_KQUANT_NORM=1 turns it on)");
  if (parts.empty() || n <= 0 || n >= (int64_t{1} << 30))
    return invalid_argument("k-quant kernel: no parts");
  std::vector<int> kinds;
  int64_t row = 0;
  for (const QuantPart& p : parts) {
    const int kind = kind_of(p);
    if (!quant::kquant_takes(kind, p))
      return unsupported(
          "k-quant kernel: a part that is not q4_k, q5_k, split q6_k, int4 rows of group 32 or "
          "q4_1 / q5_0 / q5_1 / q2_k / q3_k in the unit layout");
    if (p.k != parts[0].k || p.row_offset != row)
      return invalid_argument("k-quant kernel: parts of one k, rows in order");
    kinds.push_back(kind);
    row += p.n;
  }
  if (row != n) return invalid_argument("k-quant kernel: the parts' rows are not n");
  quant::KquantPlan plan;
  // One launch over rows [r0, r1) and tasks [t0, t1): the parts it touches, all of one kind.
  auto add = [&](int64_t r0, int64_t r1, int64_t t0, int64_t t1) -> Status {
    int first = 0;
    while (parts[static_cast<size_t>(first)].row_offset + parts[static_cast<size_t>(first)].n <= r0)
      ++first;
    int last = first;
    while (last + 1 < static_cast<int>(parts.size()) &&
           parts[static_cast<size_t>(last + 1)].row_offset < r1)
      ++last;
    for (int i = first; i <= last; ++i)
      if (kinds[static_cast<size_t>(i)] != kinds[static_cast<size_t>(first)])
        return unsupported("k-quant kernel: an epilogue's rows in parts of different kinds");
    if (last - first + 1 > quant::kKquantMaxParts)
      return unsupported("k-quant kernel: more than 3 parts in a launch");
    if (plan.nranges == quant::kKquantMaxRanges)
      return unsupported("k-quant kernel: more than 6 runs of one kind in a projection");
    quant::KquantRange& r = plan.ranges[plan.nranges++];
    r.kind = kinds[static_cast<size_t>(first)];
    r.first_part = first;
    r.nparts = last - first + 1;
    r.row_begin = static_cast<int32_t>(r0);
    r.row_end = static_cast<int32_t>(r1);
    r.task_begin = static_cast<int32_t>(t0);
    r.task_end = static_cast<int32_t>(t1);
    return Status();
  };
  switch (output) {
    case GemvOutput::kStore:
    case GemvOutput::kResidualAdd:
      // Runs of parts of one kind; task t of a run holds its rows 2 t, 2 t + 1.
      for (size_t i = 0; i < parts.size();) {
        size_t j = i;
        while (j + 1 < parts.size() && kinds[j + 1] == kinds[i] &&
               j + 1 - i < quant::kKquantMaxParts)
          ++j;
        const int64_t r0 = parts[i].row_offset, r1 = parts[j].row_offset + parts[j].n;
        LATHE_RETURN_IF_ERROR(add(r0, r1, 0, (r1 - r0 + 1) / 2));
        i = j + 1;
      }
      break;
    case GemvOutput::kSwiglu:
      if (n % 2 != 0) return invalid_argument("k-quant kernel: SwiGLU needs gate and up rows");
      LATHE_RETURN_IF_ERROR(add(0, n, 0, n / 2));
      break;
    case GemvOutput::kRopeKv: {
      if (rope == nullptr) return invalid_argument("k-quant kernel: RoPE/KV without parameters");
      const int64_t d = rope->head_dim,
                    qk = static_cast<int64_t>(rope->num_heads + rope->num_kv_heads) * d;
      if (d <= 0 || d % 2 != 0 || n != qk + rope->num_kv_heads * d)
        return invalid_argument(
            "k-quant kernel: RoPE/KV rows are not (heads + 2 kv heads) * head_dim");
      // Rotation pairs of q and k rows first, then pairs of v rows (task_rows); one launch when
      // one kind covers all.
      if (add(0, n, 0, n / 2).is_ok()) break;
      plan.nranges = 0;
      LATHE_RETURN_IF_ERROR(add(0, qk, 0, qk / 2));
      LATHE_RETURN_IF_ERROR(add(qk, n, qk / 2, n / 2));
      break;
    }
  }
  return plan;
}

}  // namespace

bool quant_kquant_parts_take(const std::vector<QuantPart>& parts, int64_t n, int64_t m,
                             GemvOutput output, const GemvRopeKv* rope, bool norm) {
  return kquant_plan(parts, n, m, output, rope, norm).is_ok();
}

Status quant_gemv_kquant_parts(const std::vector<QuantPart>& parts, DType act, const void* x,
                               DType out_dtype, void* y, int64_t n, int64_t m, GemvOutput output,
                               const GemvRopeKv& rope, cudaStream_t stream,
                               const TileNormInput* norm) {
  if (m <= 0) return Status();
  if (norm != nullptr) {
    if (norm->residual == nullptr || norm->weight == nullptr ||
        reinterpret_cast<uintptr_t>(norm->residual) % 16 != 0 ||
        reinterpret_cast<uintptr_t>(norm->weight) % 16 != 0)
      return invalid_argument(
          "quant_gemv_kquant_parts: the RMSNorm input needs 16-byte aligned residual and weight");
    x = nullptr;  // not read
  }
  if (!is_act_dtype(act) || (out_dtype != act && out_dtype != DType::kF32))
    return invalid_argument(
        "quant_gemv_kquant_parts: bf16/f16 activations, output of that type or f32");
  if ((output == GemvOutput::kSwiglu || output == GemvOutput::kRopeKv) && out_dtype != act)
    return invalid_argument("quant_gemv_kquant_parts: an epilogue writes the activation type");
  if (norm == nullptr && reinterpret_cast<uintptr_t>(x) % 16 != 0)
    return invalid_argument("quant_gemv_kquant_parts: x must be 16-byte aligned");
  if (output == GemvOutput::kRopeKv)
    LATHE_RETURN_IF_ERROR(check_rope_kv("quant_gemv_kquant_parts", n, rope, act));
  LATHE_ASSIGN_OR_RETURN(
      const quant::KquantPlan plan,
      kquant_plan(parts, n, m, output, output == GemvOutput::kRopeKv ? &rope : nullptr,
                  norm != nullptr));
  const cudaError_t err = quant::gemv_kquant_parts(parts.data(), plan, act, x, out_dtype, y, n, m,
                                                   output, rope, stream, norm);
  if (err != cudaSuccess) return cuda_error(err, "launch of the k-quant decode kernel");
  return check_launch("quant_gemv_kquants_kernel");
}

bool quant_residual_add_takes(const QuantPart& p, int64_t m) {
  return m >= 1 && m <= kQuantGemvMaxM && p.int4_tiles && p.int4_tile_pairs && !p.one_row_gemv &&
         quant_part_supported(p, nullptr);
}

Status quant_gemv_residual_add(const QuantPart& p, DType act, const void* x, float* residual,
                               int64_t ldr, int64_t m, cudaStream_t stream) {
  if (m <= 0) return Status();
  if (!is_act_dtype(act)) return invalid_argument("quant_gemv_residual_add: bf16/f16 activations");
  if (!quant_residual_add_takes(p, m))
    return unsupported(strformat(
        "quant_gemv_residual_add: a 4-bit tiled part at batches of 1 to %d", kQuantGemvMaxM));
  const cudaError_t err = quant::gemv_residual_add(p, act, x, residual, ldr, m, stream);
  if (err != cudaSuccess) return cuda_error(err, "launch of the residual-add tile kernel");
  return check_launch("quant_gemv_tiles_kernel");
}

Status quant_gemv_tile_pairs(const std::vector<QuantPart>& parts, DType act, const void* x,
                             DType out_dtype, void* y, int64_t n, int64_t m, GemvOutput output,
                             const GemvRopeKv& rope, cudaStream_t stream,
                             const TileNormInput* norm) {
  if (m <= 0) return Status();
  if (norm != nullptr && (norm->residual == nullptr || norm->weight == nullptr ||
                          reinterpret_cast<uintptr_t>(norm->residual) % 16 != 0 ||
                          reinterpret_cast<uintptr_t>(norm->weight) % 16 != 0))
    return invalid_argument(
        "quant_gemv_tile_pairs: the RMSNorm input needs 16-byte aligned residual rows and weight");
  if (!is_act_dtype(act) || (out_dtype != act && out_dtype != DType::kF32))
    return invalid_argument(
        "quant_gemv_tile_pairs: bf16/f16 activations, output of that type or f32");
  if (output != GemvOutput::kStore && out_dtype != act)
    return invalid_argument("quant_gemv_tile_pairs: an epilogue writes the activation type");
  if (output == GemvOutput::kRopeKv)
    LATHE_RETURN_IF_ERROR(check_rope_kv("quant_gemv_tile_pairs", n, rope, act));
  LATHE_ASSIGN_OR_RETURN(
      const TilePlan plan,
      tile_pairs_plan(parts, n, m, output, output == GemvOutput::kRopeKv ? &rope : nullptr,
                      norm != nullptr));
  const cudaError_t err = quant::gemv_tile_pairs(parts.data(), plan, act, x, out_dtype, y, n, m,
                                                 output, rope, norm, stream);
  if (err != cudaSuccess) return cuda_error(err, "launch of the tile-pairs kernel");
  return check_launch("quant_gemv_tiles_kernel");
}

Status quant_dequantize(const QuantPart& p, DType act, void* out, int64_t r0, int64_t r1,
                        cudaStream_t stream) {
  if (r1 <= r0) return Status();
  if (!is_act_dtype(act)) return invalid_argument("quant_dequantize: bf16 or f16 output");
  if (r0 < 0 || r1 > p.n) return invalid_argument("quant_dequantize: rows outside the part");
  LATHE_RETURN_IF_ERROR(check(p, "quant_dequantize"));
  const int kind = kind_of(p);
  const cudaError_t err = is_gguf_kind(kind)
                              ? quant::dequantize_gguf(kind, p, act, out, r0, r1, stream)
                              : quant::dequantize_other(kind, p, act, out, r0, r1, stream);
  if (err != cudaSuccess) return cuda_error(err, "launch of quant_dequantize_kernel");
  return check_launch("quant_dequantize_kernel");
}

}  // namespace lathe::cuda
