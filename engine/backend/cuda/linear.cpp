#include "engine/backend/cuda/linear.h"

#include <algorithm>

#include "engine/backend/cuda/decode_gemv.h"
#include "engine/backend/cuda/fp8_activations.h"
#include "engine/backend/cuda/launch_timer.h"
#include "engine/backend/cuda/random_fill.h"
#include "engine/core/log.h"

namespace lathe::cuda {

Status LinearDispatcher::check_format(const DeviceLinear& w) const {
  if (!w.parts.empty()) return Status();  // checked per part by its kernel
  if (w.format == WeightFormat::kDense && w.dtype == dtype_) return Status();
  return unsupported(w.name + ": no CUDA kernel for " + std::string(weight_format_name(w.format)) +
                     " " + std::string(dtype_name(w.dtype)) + " weights with " +
                     std::string(dtype_name(dtype_)) + " activations");
}

bool LinearDispatcher::use_gemv(const DeviceLinear& w, DType out_dtype, int64_t m) const {
  if (w.format != WeightFormat::kDense || m > kGemvMaxM || w.k % 8 != 0) return false;
  auto it = table_.find(Key{w.n, w.k, static_cast<int>(out_dtype)});
  if (it == table_.end()) return m <= 2;
  return it->second[static_cast<size_t>(m)];
}

bool LinearDispatcher::takes_epilogue(const DeviceLinear& w, int64_t m, GemvOutput output,
                                      const GemvRopeKv* rope) const {
  if (output == GemvOutput::kStore) return true;
  if (!w.parts.empty()) {
    if (w8_decode_takes(w, m, output, rope, /*norm=*/false)) return true;
    if (quant_kquant_parts_take(w.parts, w.n, m, output, rope)) return true;
    if (output == GemvOutput::kResidualAdd)
      return std::all_of(w.parts.begin(), w.parts.end(),
                         [&](const QuantPart& p) { return quant_residual_add_takes(p, m); });
    return quant_tile_pairs_take(w.parts, w.n, m, output, rope);
  }
  return gemv_epilogues_ && output != GemvOutput::kResidualAdd && m <= kGemvEpilogueMaxM &&
         use_gemv(w, dtype_, m);
}

bool LinearDispatcher::takes_norm_input(const DeviceLinear& w, int64_t m, GemvOutput output,
                                        const GemvRopeKv* rope) const {
  return !w.parts.empty() && output != GemvOutput::kResidualAdd &&
         (w8_decode_takes(w, m, output, rope, /*norm=*/true) ||
          quant_kquant_parts_take(w.parts, w.n, m, output, rope, /*norm=*/true) ||
          quant_tile_pairs_take(w.parts, w.n, m, output, rope, /*norm=*/true));
}

Status LinearDispatcher::run(const DeviceLinear& w, DType out_dtype, const void* x, void* y,
                             int64_t m, cudaStream_t stream, GemvOutput output,
                             const GemvRopeKv& rope, const TileNormInput* norm) const {
  if (m <= 0) return Status();
  LATHE_RETURN_IF_ERROR(check_format(w));
  if (norm != nullptr && w.parts.empty())
    return internal_error(w.name + ": the RMSNorm input is for 4-bit tiled projections");
  if (!w.parts.empty()) {
    // 4-bit tiles: the projection's parts in one launch with the epilogue (quant_tile_plan.h);
    // one part alone keeps the one-tile kernel.
    const GemvRopeKv* r = output == GemvOutput::kRopeKv ? &rope : nullptr;
    // FP8 and 8-bit integers at decode batches: the projection's parts in one launch of the
    // fused decode kernel, with the epilogue and the RMSNorm input (W8A8 first where it applies).
    if (w8_decode_takes(w, m, output, r, norm != nullptr))
      return quant_gemv_w8_parts(w.parts, dtype_, x, out_dtype, y, w.n, m, output, rope, stream,
                                 norm);
    // GGUF k-quants: the projection's parts in one launch per kind, with the epilogue and the
    // RMSNorm input.
    if ((norm != nullptr || output != GemvOutput::kStore || w.parts.size() > 1) &&
        quant_kquant_parts_take(w.parts, w.n, m, output, r, norm != nullptr))
      return quant_gemv_kquant_parts(w.parts, dtype_, x, out_dtype, y, w.n, m, output, rope, stream,
                                     norm);
    if (output == GemvOutput::kResidualAdd) {
      if (!takes_epilogue(w, m, output))
        return internal_error(w.name + ": the residual add was asked of a kernel that cannot");
      for (const QuantPart& p : w.parts)
        LATHE_RETURN_IF_ERROR(
            quant_gemv_residual_add(p, dtype_, x, static_cast<float*>(y), w.n, m, stream));
      return Status();
    }
    if (norm != nullptr || ((output != GemvOutput::kStore || w.parts.size() > 1) &&
                            quant_tile_pairs_take(w.parts, w.n, m, output, r)))
      return quant_gemv_tile_pairs(w.parts, dtype_, x, out_dtype, y, w.n, m, output, rope, stream,
                                   norm);
    if (output != GemvOutput::kStore)
      return internal_error(w.name + ": the epilogue was asked of a kernel that cannot apply it");
    return run_stored(w, out_dtype, x, y, m, stream);
  }
  if (output != GemvOutput::kStore) {
    if (!takes_epilogue(w, m, output))
      return internal_error(w.name + ": the epilogue was asked of a kernel that cannot apply it");
    return gemv(dtype_, out_dtype, x, w.w, y, m, w.n, w.k, stream, output, rope);
  }
  if (use_gemv(w, out_dtype, m)) return gemv(dtype_, out_dtype, x, w.w, y, m, w.n, w.k, stream);
  return gemm_->matmul(dtype_, out_dtype, x, w.w, y, m, w.n, w.k, stream);
}

namespace {

// The W8A8 path's use of the dequantization workspace: e4m3 activations [m, k], then their scale
// and the amax scratch (16 bytes).
int64_t fp8_codes_bytes(int64_t m, int64_t k) {
  return (m * k + 255) / 256 * 256;
}

}  // namespace

bool LinearDispatcher::fp8_gemm_takes(const DeviceLinear& w, int64_t m) const {
  if (!fp8_gemm_ || fp8_gemm_failed_ || m < fp8_gemm_min_m_ || w.k % 16 != 0 || w.parts.empty())
    return false;
  if (m <= kDecodeGemvMaxM && w.k <= fp8_decode_max_k_) return false;
  for (const QuantPart& p : w.parts)
    if (p.format != WeightFormat::kFp8 || p.fp8_scale != ScaleGranularity::kTensor) return false;
  return dequant_ws_ != nullptr && fp8_codes_bytes(m, w.k) + 16 <= dequant_ws_bytes_;
}

bool LinearDispatcher::w8_decode_takes(const DeviceLinear& w, int64_t m, GemvOutput output,
                                       const GemvRopeKv* rope, bool norm) const {
  return !fp8_gemm_takes(w, m) && quant_w8_parts_take(w.parts, w.n, m, output, rope, norm);
}

Status LinearDispatcher::run_fp8(const DeviceLinear& w, DType out_dtype, const void* x, void* y,
                                 int64_t m, cudaStream_t stream) const {
  uint8_t* xq = static_cast<uint8_t*>(dequant_ws_);
  float* xs = reinterpret_cast<float*>(xq + fp8_codes_bytes(m, w.k));
  uint32_t* amax = reinterpret_cast<uint32_t*>(xs + 1);
  LATHE_RETURN_IF_ERROR(quantize_fp8_activations(dtype_, x, m, w.k, xq, xs, amax, stream));
  const int64_t out_bytes = out_dtype == DType::kF32 ? 4 : 2;
  for (const QuantPart& p : w.parts)
    LATHE_RETURN_IF_ERROR(gemm_->matmul_fp8(
        out_dtype, xq, xs, static_cast<const uint8_t*>(p.data), static_cast<const float*>(p.scales),
        static_cast<uint8_t*>(y) + p.row_offset * out_bytes, m, p.n, w.k, stream, w.n));
  return Status();
}

Status LinearDispatcher::run_stored(const DeviceLinear& w, DType out_dtype, const void* x, void* y,
                                    int64_t m, cudaStream_t stream) const {
  if (fp8_gemm_takes(w, m)) {
    const Status s = run_fp8(w, out_dtype, x, y, m, stream);
    if (s.is_ok() || s.code() != ErrorCode::kUnsupported) return s;
    // No cuBLASLt algorithm for these scale modes: W8A16 from now on, said once.
    fp8_gemm_failed_ = true;
    log_warning("CUDA: " + s.message() + "; FP8 weights run as W8A16 (dequantized) instead");
  }
  if (m <= kQuantGemvMaxM) {
    for (const QuantPart& p : w.parts)
      LATHE_RETURN_IF_ERROR(quant_gemv(p, dtype_, x, out_dtype, y, w.n, m, stream));
    return Status();
  }
  // Tiled 4-bit parts: the tile kernel in slabs of kTileMaxM rows (each slab reads the weights
  // once), up to the parts' int4_tiles_max_m.
  const bool tiles = std::all_of(w.parts.begin(), w.parts.end(), [&](const QuantPart& p) {
    return m <= p.int4_tiles_max_m && quant_gemv_takes(p, std::min<int64_t>(m, kTileMaxM));
  });
  if (tiles) {
    const int64_t out_bytes = out_dtype == DType::kF32 ? 4 : 2;
    for (int64_t m0 = 0; m0 < m; m0 += kTileMaxM) {
      const int64_t rows = std::min<int64_t>(kTileMaxM, m - m0);
      const uint8_t* xs = static_cast<const uint8_t*>(x) + m0 * w.k * 2;
      uint8_t* ys = static_cast<uint8_t*>(y) + m0 * w.n * out_bytes;
      for (const QuantPart& p : w.parts)
        LATHE_RETURN_IF_ERROR(quant_gemv(p, dtype_, xs, out_dtype, ys, w.n, rows, stream));
    }
    return Status();
  }
  // Tiled 4-bit parts above: the W4A16 GEMM kernel (weights decoded in registers), its splits'
  // partial sums in the dequantization workspace.
  if (std::all_of(w.parts.begin(), w.parts.end(),
                  [&](const QuantPart& p) { return quant_gemm_int4_takes(p, m); })) {
    for (const QuantPart& p : w.parts)
      LATHE_RETURN_IF_ERROR(quant_gemm_int4(p, dtype_, x, out_dtype, y, w.n, m, dequant_ws_,
                                            dequant_ws_bytes_, stream));
    return Status();
  }
  // Dequantize a slab of rows into the workspace, one GEMM into the slab's columns of y.
  const int64_t row_bytes = w.k * 2;
  const int64_t slab = std::min<int64_t>(w.n, dequant_ws_bytes_ / row_bytes);
  if (dequant_ws_ == nullptr || slab <= 0)
    return internal_error(w.name + ": no dequantization workspace for a batch of " +
                          std::to_string(m));
  const int64_t out_bytes = out_dtype == DType::kF32 ? 4 : 2;
  for (int64_t s0 = 0; s0 < w.n; s0 += slab) {
    const int64_t s1 = std::min(w.n, s0 + slab);
    for (const QuantPart& p : w.parts) {
      const int64_t a = std::max(s0, p.row_offset), b = std::min(s1, p.row_offset + p.n);
      if (a >= b) continue;
      uint8_t* dst = static_cast<uint8_t*>(dequant_ws_) + (a - s0) * row_bytes;
      LATHE_RETURN_IF_ERROR(
          quant_dequantize(p, dtype_, dst, a - p.row_offset, b - p.row_offset, stream));
    }
    LATHE_RETURN_IF_ERROR(gemm_->matmul(dtype_, out_dtype, x, dequant_ws_,
                                        static_cast<uint8_t*>(y) + s0 * out_bytes, m, s1 - s0, w.k,
                                        stream, w.n));
  }
  return Status();
}

Status LinearDispatcher::autotune(const std::vector<std::pair<DeviceLinear, DType>>& shapes,
                                  void* x_scratch, void* y_scratch, cudaStream_t stream) {
  int64_t max_k = 0;
  for (const auto& [w, out] : shapes) max_k = std::max(max_k, w.k);
  LATHE_RETURN_IF_ERROR(constant_fill(dtype_, x_scratch, kGemvMaxM * max_k, 0.01f, stream));
  for (const auto& [w, out] : shapes) {
    if (w.format != WeightFormat::kDense) continue;  // one kernel per M for other formats
    const Key key{w.n, w.k, static_cast<int>(out)};
    if (table_.count(key) != 0) continue;
    std::array<bool, kGemvMaxM + 1> row{};
    for (int64_t m = 1; m <= kGemvMaxM; ++m) {
      LinearTiming t;
      t.name = w.name;
      t.n = w.n, t.k = w.k, t.m = m;
      if (w.k % 8 == 0) {
        LATHE_ASSIGN_OR_RETURN(
            t.gemv_us,
            time_launches_us(
                [&] { return gemv(dtype_, out, x_scratch, w.w, y_scratch, m, w.n, w.k, stream); },
                stream, 3, 10));
      } else {
        t.gemv_us = 1e30;
      }
      LATHE_ASSIGN_OR_RETURN(t.cublas_us, time_launches_us(
                                              [&] {
                                                return gemm_->matmul(dtype_, out, x_scratch, w.w,
                                                                     y_scratch, m, w.n, w.k,
                                                                     stream);
                                              },
                                              stream, 3, 10));
      t.use_gemv = gemv_wins(m, t.gemv_us, t.cublas_us);
      row[static_cast<size_t>(m)] = t.use_gemv;
      timings_.push_back(t);
    }
    table_[key] = row;
  }
  return Status();
}

}  // namespace lathe::cuda
