// A projection's FP8 or 8-bit integer parts on decode_gemv's kernel (quant_linear.h's
// quant_gemv_w8_parts): the parts and their scales described as decode_gemv.h's GemvW8Part and
// GemvW8Scales, or the reason they cannot be.
#include <bit>

#include "engine/backend/cuda/cuda_common.h"
#include "engine/backend/cuda/decode_gemv.h"
#include "engine/backend/cuda/quant_linear.h"
#include "engine/core/strings.h"

namespace lathe::cuda {
namespace {

// The scale layout of one part (decode_gemv.h: scale(r, e) = scales[(r >> row_shift) * row_stride
// + (e >> group_shift)]), or why the kernel cannot read it.
Result<GemvW8Scales> scales_of(const QuantPart& p) {
  GemvW8Scales s;
  if (p.format == WeightFormat::kFp8) {
    switch (p.fp8_scale) {
      case ScaleGranularity::kChannel:
        s.row_stride = 1;
        break;
      case ScaleGranularity::kBlock:
        s.row_shift = 7;
        s.row_stride = static_cast<int32_t>((p.k + 127) / 128);
        s.group_shift = 7;
        break;
      default:  // per tensor: every index 0
        break;
    }
    return s;
  }
  s.f16 = p.scale_dtype == DType::kF16;
  s.row_stride = static_cast<int32_t>(p.k / p.group_size);
  if (p.group_size == p.k) return s;  // per channel
  if (!std::has_single_bit(static_cast<uint32_t>(p.group_size)) || p.group_size < 16)
    return unsupported(
        strformat("8-bit decode kernel: groups of a power of two, not %d", p.group_size));
  s.group_shift = std::countr_zero(static_cast<uint32_t>(p.group_size));
  return s;
}

bool same_scales(const GemvW8Scales& a, const GemvW8Scales& b) {
  return a.row_shift == b.row_shift && a.row_stride == b.row_stride &&
         a.group_shift == b.group_shift && a.f16 == b.f16;
}

// decode_gemv's arguments for the parts (weights, parts, scales, n, k, m, output), or why not.
Result<DecodeGemvArgs> w8_args(const std::vector<QuantPart>& parts, int64_t n, int64_t m,
                               GemvOutput output, const GemvRopeKv* rope, bool norm) {
  if (parts.empty() || parts.size() > static_cast<size_t>(kGemvMaxParts))
    return unsupported(strformat("8-bit decode kernel: 1 to %d parts", kGemvMaxParts));
  const QuantPart& first = parts[0];
  const int32_t max_m = std::min<int32_t>(first.w8_decode_max_m, kDecodeGemvMaxM);
  if (m < 1 || m > max_m)
    return unsupported(strformat(
        "8-bit decode kernel: batches of 1 to %d rows (LATHE_CUDA_W8_DECODE_MAX_M)", max_m));
  const bool fp8 = first.format == WeightFormat::kFp8;
  if (!fp8 && !(first.format == WeightFormat::kInt && first.bits == 8))
    return unsupported("8-bit decode kernel: FP8 or 8-bit integer parts only");
  if (first.k % 16 != 0 || first.k >= (int64_t{1} << 30) || n <= 0 || n >= (int64_t{1} << 31))
    return unsupported("8-bit decode kernel: k % 16 == 0 and n, k in range");
  DecodeGemvArgs a;
  a.weights = fp8 ? GemvWeights::kFp8 : GemvWeights::kInt8;
  a.n = n;
  a.k = first.k;
  a.m = m;
  a.w8.nparts = static_cast<int>(parts.size());
  int64_t row = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const QuantPart& p = parts[i];
    std::string why;
    if (!quant_part_supported(p, &why)) return unsupported("8-bit decode kernel: " + why);
    if (p.format != first.format || p.bits != first.bits || p.g_idx != nullptr || p.one_row_gemv ||
        p.k != first.k || p.row_offset != row)
      return unsupported(
          "8-bit decode kernel: parts of one format and k, rows in order, no act-order");
    LATHE_ASSIGN_OR_RETURN(GemvW8Scales s, scales_of(p));
    if (i == 0) a.w8.scales = s;
    if (!same_scales(s, a.w8.scales))
      return unsupported("8-bit decode kernel: the parts' scales are laid out differently");
    GemvW8Part& q = a.w8.parts[i];
    q.codes = static_cast<const uint8_t*>(p.data);
    q.scales = p.scales;
    q.zeros = fp8 ? nullptr : p.zeros;
    q.row_begin = static_cast<int32_t>(row);
    row += p.n;
  }
  if (row != n) return unsupported("8-bit decode kernel: the parts' rows are not the projection's");
  // Groups of fewer than 128 inputs (GGUF Q8_0 repacked: 32) load a scale every vector or two; at
  // batch 1 the rows kernel is faster there (run 81, Q8_0 8B: 239 tok/s against 253; run 93, with
  // the f16-pair products: 248 against 257), from batch 2 this one (404 against 367 at 2, 562
  // against 486 at 4; run 90: 448 and 651).
  if (norm && output == GemvOutput::kResidualAdd) {
    return unsupported("8-bit decode kernel: the residual add takes a plain input");
  } else if (!norm && (output == GemvOutput::kSwiglu || output == GemvOutput::kRopeKv)) {
    // decode_gemv instantiates these with the RMSNorm input only; a plain input is stored and
    // finished by the epilogue's own kernel.
    return unsupported("8-bit decode kernel: SwiGLU and RoPE/KV with the RMSNorm input only");
  }
  if (output == GemvOutput::kSwiglu && n % 2 != 0)
    return unsupported("8-bit decode kernel: SwiGLU needs gate and up rows");
  if (output == GemvOutput::kRopeKv &&
      (rope == nullptr || rope->head_dim <= 0 || rope->head_dim % 2 != 0 ||
       n != static_cast<int64_t>(rope->num_heads + 2 * rope->num_kv_heads) * rope->head_dim ||
       !is_act_dtype(rope->kv_dtype)))
    return unsupported("8-bit decode kernel: RoPE/KV needs the heads' rows and a 16-bit cache");
  if (!decode_gemv_fits(m, first.k, current_device_limits().smem_optin))
    return unsupported("8-bit decode kernel: the activations do not fit in shared memory");
  a.input = norm ? GemvInput::kRmsNorm : GemvInput::kPlain;
  a.output = output;
  a.blocks_per_sm = first.w8_decode_blocks;
  return a;
}

}  // namespace

bool quant_w8_parts_take(const std::vector<QuantPart>& parts, int64_t n, int64_t m,
                         GemvOutput output, const GemvRopeKv* rope, bool norm, std::string* why) {
  const Result<DecodeGemvArgs> a = w8_args(parts, n, m, output, rope, norm);
  if (!a.is_ok() && why != nullptr) *why = a.status().message();
  return a.is_ok();
}

Status quant_gemv_w8_parts(const std::vector<QuantPart>& parts, DType act, const void* x,
                           DType out_dtype, void* y, int64_t n, int64_t m, GemvOutput output,
                           const GemvRopeKv& rope, cudaStream_t stream, const TileNormInput* norm) {
  if (m <= 0) return Status();
  LATHE_ASSIGN_OR_RETURN(DecodeGemvArgs a, w8_args(parts, n, m, output, &rope, norm != nullptr));
  if (!is_act_dtype(act)) return invalid_argument("quant_gemv_w8_parts: bf16 or f16 activations");
  if (output != GemvOutput::kStore && out_dtype != act)
    return invalid_argument(
        "quant_gemv_w8_parts: an epilogue's output is of the activation type, not f32");
  a.dtype = act;
  a.out_dtype = out_dtype;
  a.x = x;
  if (norm != nullptr) {
    a.residual = norm->residual;
    a.norm_weight = norm->weight;
    a.eps = norm->eps;
  }
  if (output == GemvOutput::kResidualAdd)
    a.residual_out = static_cast<float*>(y);
  else
    a.y = y;
  if (output == GemvOutput::kRopeKv) a.rope = rope;
  return decode_gemv(a, stream);
}

}  // namespace lathe::cuda
