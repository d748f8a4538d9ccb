// linear(): y[M, N] = x[M, K] · W[N, K]ᵀ (+ bias) for float and GGUF block-quantized weights.
//
// Work is split over tiles of kTileRows rows of W (output channels). Two ways to run a tile:
//   fused (M <= kFusedMaxRows, decode): each 32-weight group of W is dequantized into registers
//     (cpu_dequant_avx2.h) and multiplied straight into the accumulators of every row of x;
//   tiled (prefill): the tile is dequantized into a float32 scratch once per block of kRowBlock
//   rows
//     of x, then register-blocked micro-kernels reuse each row of W across the rows of x.
// Every output element is the canonical dot product of cpu_simd.h of x with the weights as
// cpu_dequant.h defines them, plus the bias: the result does not depend on M, on the path or
// micro-kernel that computed it, on the thread count, or on the instruction set.
// Quantized formats (int, fp8) always take the tiled path: the tile is decoded by
// weight_dequant.h's reference decoder (clarity over speed), then multiplied by the same
// micro-kernels.
#include <algorithm>
#include <cstring>
#include <vector>

#include "engine/backend/cpu/cpu_dequant.h"
#include "engine/backend/cpu/cpu_dequant_avx2.h"
#include "engine/backend/cpu/cpu_ops.h"
#include "engine/backend/cpu/cpu_simd.h"
#include "engine/core/thread_pool.h"
#include "engine/model/weight_dequant.h"

namespace lathe::cpu {
namespace {

constexpr int64_t kTileRows = 8;      // rows of W per tile (one parallel work item)
constexpr int64_t kRowBlock = 64;     // rows of x per cache block
constexpr int64_t kFusedMaxRows = 8;  // up to this many rows of x: the fused (decode) path

int64_t round_up8(int64_t k) {
  return (k + 7) / 8 * 8;
}

// ---- scalar path -----------------------------------------------------------------------------

void dequant_tile_scalar(const TensorView& w, int64_t r0, int64_t nr, int64_t k, float* dst,
                         int64_t ld) {
  for (int64_t r = 0; r < nr; ++r) {
    detail::dequant_row(w.dtype, w.row_ptr(r0 + r), dst + r * ld, k);
    std::fill(dst + r * ld + k, dst + r * ld + ld, 0.f);
  }
}

void tile_scalar(const float* x, int64_t ldx, int64_t mr, const float* w, int64_t ldw, int64_t nr,
                 int64_t k, float* y, int64_t ldy, const float* bias) {
  for (int64_t i = 0; i < mr; ++i)
    for (int64_t j = 0; j < nr; ++j) {
      float v = detail::dot_scalar(x + i * ldx, w + j * ldw, k);
      if (bias != nullptr) v += bias[j];
      y[i * ldy + j] = v;
    }
}

// ---- AVX2 path -------------------------------------------------------------------------------
#if LATHE_CPU_X86

using detail::BlockBF16;
using detail::BlockF16;
using detail::BlockK;
using detail::BlockQ4;
using detail::BlockQ5;
using detail::BlockQ6_K;
using detail::BlockQ8_0;

template <class Block>
LATHE_AVX2 void dequant_blocks_avx2(const uint8_t* row, float* y, int64_t k) {
  for (int64_t g = 0; g < k / 32; ++g) {
    __m256 w[4];
    Block::load(row, g, w);
    for (int i = 0; i < 4; ++i) _mm256_storeu_ps(y + 32 * g + 8 * i, w[i]);
  }
}

// One row of W into y[0, k).
LATHE_AVX2 void dequant_row_avx2(DType type, const uint8_t* row, float* y, int64_t k) {
  const bool whole = k % 32 == 0;
  switch (type) {
    case DType::kQ8_0:
      return dequant_blocks_avx2<BlockQ8_0>(row, y, k);
    case DType::kQ4_0:
      return dequant_blocks_avx2<BlockQ4<false>>(row, y, k);
    case DType::kQ4_1:
      return dequant_blocks_avx2<BlockQ4<true>>(row, y, k);
    case DType::kQ5_0:
      return dequant_blocks_avx2<BlockQ5<false>>(row, y, k);
    case DType::kQ5_1:
      return dequant_blocks_avx2<BlockQ5<true>>(row, y, k);
    case DType::kQ4_K:
      return dequant_blocks_avx2<BlockK<false>>(row, y, k);
    case DType::kQ5_K:
      return dequant_blocks_avx2<BlockK<true>>(row, y, k);
    case DType::kQ6_K:
      return dequant_blocks_avx2<BlockQ6_K>(row, y, k);
    case DType::kF16:
      if (whole) return dequant_blocks_avx2<BlockF16>(row, y, k);
      break;
    case DType::kBF16:
      if (whole) return dequant_blocks_avx2<BlockBF16>(row, y, k);
      break;
    default:
      break;
  }
  detail::dequant_row(type, row, y, k);  // f16 / bf16 rows that are not a multiple of 32
}

// Few rows of x (decode): dequantize each block of W straight into registers and multiply-add it,
// NR rows of W at a time; no scratch round trip. Same per-element arithmetic as the tiled path.
template <class Block, int MR, int NR>
LATHE_AVX2 void fused_avx2(const float* x, int64_t ldx, const uint8_t* w, int64_t w_row_bytes,
                           int64_t k, float* y, int64_t ldy, const float* bias) {
  __m256 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
  constexpr int64_t kBytesPer32 = Block::kBlockBytes * 32 / Block::kBlockSize;  // for prefetching
  for (int64_t b = 0; b < k / 32; ++b) {
    // The next NR rows follow in memory: fetch their group b now, a row group ahead of its use.
    for (int j = 0; j < NR; ++j)
      _mm_prefetch(reinterpret_cast<const char*>(w + (NR + j) * w_row_bytes + b * kBytesPer32),
                   _MM_HINT_T0);
    for (int j = 0; j < NR; ++j) {
      __m256 wv[4];
      Block::load(w + j * w_row_bytes, b, wv);
      for (int i = 0; i < MR; ++i)
        for (int g = 0; g < 4; ++g)
          acc[i][j] =
              _mm256_fmadd_ps(wv[g], _mm256_loadu_ps(x + i * ldx + 32 * b + 8 * g), acc[i][j]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) {
      float v = detail::reduce_avx2(acc[i][j]);
      if (bias != nullptr) v += bias[j];
      y[i * ldy + j] = v;
    }
}

template <class Block, int MR, int NR>
LATHE_AVX2 void fused_rows_avx2(const float* x, int64_t ldx, const uint8_t* base, int64_t rb,
                                int64_t nr, int64_t k, float* y, int64_t ldy, const float* bias) {
  int64_t j = 0;
  for (; j + NR <= nr; j += NR)
    fused_avx2<Block, MR, NR>(x, ldx, base + j * rb, rb, k, y + j, ldy, bias ? bias + j : nullptr);
  for (; j < nr; ++j)
    fused_avx2<Block, MR, 1>(x, ldx, base + j * rb, rb, k, y + j, ldy, bias ? bias + j : nullptr);
}

template <class Block>
LATHE_AVX2 void fused_tile_avx2(const float* x, int64_t ldx, int64_t mr, const TensorView& w,
                                int64_t r0, int64_t nr, int64_t k, float* y, int64_t ldy,
                                const float* bias) {
  const int64_t rb = w.row_bytes();
  const uint8_t* base = w.row_ptr(r0);
  for (int64_t i = 0; i < mr;) {
    const int64_t left = mr - i;
    const float* xi = x + i * ldx;
    float* yi = y + i * ldy;
    if (left == 1) {
      fused_rows_avx2<Block, 1, 4>(xi, ldx, base, rb, nr, k, yi, ldy, bias);
      i += 1;
    } else if (left == 2) {
      fused_rows_avx2<Block, 2, 4>(xi, ldx, base, rb, nr, k, yi, ldy, bias);
      i += 2;
    } else if (left == 3 || left == 6) {
      fused_rows_avx2<Block, 3, 2>(xi, ldx, base, rb, nr, k, yi, ldy, bias);
      i += 3;
    } else {
      fused_rows_avx2<Block, 4, 2>(xi, ldx, base, rb, nr, k, yi, ldy, bias);
      i += 4;
    }
  }
}

// Whether the fused path handles this type and K; returns false to use the tiled path.
LATHE_AVX2 bool try_fused_tile_avx2(const float* x, int64_t ldx, int64_t mr, const TensorView& w,
                                    int64_t r0, int64_t nr, int64_t k, float* y, int64_t ldy,
                                    const float* bias) {
  if (k % 32 != 0) return false;
  switch (w.dtype) {
    case DType::kQ8_0:
      fused_tile_avx2<BlockQ8_0>(x, ldx, mr, w, r0, nr, k, y, ldy, bias);
      return true;
    case DType::kQ4_0:
      fused_tile_avx2<BlockQ4<false>>(x, ldx, mr, w, r0, nr, k, y, ldy, bias);
      return true;
    case DType::kQ4_1:
      fused_tile_avx2<BlockQ4<true>>(x, ldx, mr, w, r0, nr, k, y, ldy, bias);
      return true;
    case DType::kQ5_0:
      fused_tile_avx2<BlockQ5<false>>(x, ldx, mr, w, r0, nr, k, y, ldy, bias);
      return true;
    case DType::kQ5_1:
      fused_tile_avx2<BlockQ5<true>>(x, ldx, mr, w, r0, nr, k, y, ldy, bias);
      return true;
    case DType::kQ4_K:
      fused_tile_avx2<BlockK<false>>(x, ldx, mr, w, r0, nr, k, y, ldy, bias);
      return true;
    case DType::kQ5_K:
      fused_tile_avx2<BlockK<true>>(x, ldx, mr, w, r0, nr, k, y, ldy, bias);
      return true;
    case DType::kQ6_K:
      fused_tile_avx2<BlockQ6_K>(x, ldx, mr, w, r0, nr, k, y, ldy, bias);
      return true;
    case DType::kF16:
      fused_tile_avx2<BlockF16>(x, ldx, mr, w, r0, nr, k, y, ldy, bias);
      return true;
    case DType::kBF16:
      fused_tile_avx2<BlockBF16>(x, ldx, mr, w, r0, nr, k, y, ldy, bias);
      return true;
    default:
      return false;
  }
}

LATHE_AVX2 void dequant_tile_avx2(const TensorView& w, int64_t r0, int64_t nr, int64_t k,
                                  float* dst, int64_t ld) {
  for (int64_t r = 0; r < nr; ++r) {
    dequant_row_avx2(w.dtype, w.row_ptr(r0 + r), dst + r * ld, k);
    for (int64_t i = k; i < ld; ++i) dst[r * ld + i] = 0.f;
  }
}

// MR rows of x times NR rows of W; K may be any length (masked last group).
template <int MR, int NR>
LATHE_AVX2 void micro_avx2(const float* x, int64_t ldx, const float* w, int64_t ldw, int64_t k,
                           float* y, int64_t ldy, const float* bias) {
  __m256 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
  int64_t kk = 0;
  for (; kk + 8 <= k; kk += 8) {
    __m256 wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = _mm256_loadu_ps(w + j * ldw + kk);
    for (int i = 0; i < MR; ++i) {
      const __m256 xv = _mm256_loadu_ps(x + i * ldx + kk);
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_fmadd_ps(wv[j], xv, acc[i][j]);
    }
  }
  if (kk < k) {
    const __m256i mask = detail::lane_mask_avx2(k - kk);
    __m256 wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = _mm256_maskload_ps(w + j * ldw + kk, mask);
    for (int i = 0; i < MR; ++i) {
      const __m256 xv = _mm256_maskload_ps(x + i * ldx + kk, mask);
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_fmadd_ps(wv[j], xv, acc[i][j]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) {
      float v = detail::reduce_avx2(acc[i][j]);
      if (bias != nullptr) v += bias[j];
      y[i * ldy + j] = v;
    }
}

// Rows [0, mr) of x times rows [0, nr) of W (nr <= kTileRows).
LATHE_AVX2 void tile_avx2(const float* x, int64_t ldx, int64_t mr, const float* w, int64_t ldw,
                          int64_t nr, int64_t k, float* y, int64_t ldy, const float* bias) {
  int64_t i = 0;
  if (nr == 8 && mr < 3) {  // decode: one row of x against the whole tile, eight independent chains
    for (; i < mr; ++i) micro_avx2<1, 8>(x + i * ldx, ldx, w, ldw, k, y + i * ldy, ldy, bias);
    return;
  }
  for (int64_t j = 0; j < nr; j += 4) {
    const float* wj = w + j * ldw;
    const float* bj = bias != nullptr ? bias + j : nullptr;
    float* yj = y + j;
    if (nr - j >= 4) {
      int64_t r = 0;
      for (; r + 3 <= mr; r += 3)
        micro_avx2<3, 4>(x + r * ldx, ldx, wj, ldw, k, yj + r * ldy, ldy, bj);
      for (; r < mr; ++r) micro_avx2<1, 4>(x + r * ldx, ldx, wj, ldw, k, yj + r * ldy, ldy, bj);
    } else {
      for (int64_t jj = 0; jj < nr - j; ++jj) {
        int64_t r = 0;
        for (; r + 4 <= mr; r += 4)
          micro_avx2<4, 1>(x + r * ldx, ldx, wj + jj * ldw, ldw, k, yj + jj + r * ldy, ldy,
                           bj ? bj + jj : nullptr);
        for (; r < mr; ++r)
          micro_avx2<1, 1>(x + r * ldx, ldx, wj + jj * ldw, ldw, k, yj + jj + r * ldy, ldy,
                           bj ? bj + jj : nullptr);
      }
    }
  }
}
#endif

struct LinearJob {
  const float* x;
  int64_t m;
  const WeightMatrix* w;
  const float* bias;
  float* y;
};

// Quantized formats (int, fp8): every tile decoded by the reference decoder, then the float
// micro-kernels.
void run_tiles_quantized(const LinearJob& job, int64_t t0, int64_t t1, bool avx2) {
  const WeightMatrix& w = *job.w;
  const int64_t n = w.n, k = w.k, ld = round_up8(k);
  thread_local std::vector<float> scratch;
  if (scratch.size() < static_cast<size_t>(kTileRows * ld)) scratch.resize(kTileRows * ld);
  for (int64_t m0 = 0; m0 < job.m; m0 += kRowBlock) {
    const int64_t mb = std::min(kRowBlock, job.m - m0);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t r0 = t * kTileRows;
      const int64_t nr = std::min(kTileRows, n - r0);
      const float* bias = job.bias != nullptr ? job.bias + r0 : nullptr;
      dequantize_matrix_rows(w, r0, r0 + nr, scratch.data(), ld);
      for (int64_t r = 0; r < nr; ++r)
        std::fill(scratch.data() + r * ld + k, scratch.data() + (r + 1) * ld, 0.f);
#if LATHE_CPU_X86
      if (avx2) {
        tile_avx2(job.x + m0 * k, k, mb, scratch.data(), ld, nr, k, job.y + m0 * n + r0, n, bias);
        continue;
      }
#endif
      tile_scalar(job.x + m0 * k, k, mb, scratch.data(), ld, nr, k, job.y + m0 * n + r0, n, bias);
    }
  }
  (void)avx2;
}

void run_tiles(const LinearJob& job, int64_t t0, int64_t t1, bool avx2) {
  if (job.w->format == WeightFormat::kInt || job.w->format == WeightFormat::kFp8)
    return run_tiles_quantized(job, t0, t1, avx2);
  const TensorView& w = job.w->data;
  const int64_t n = w.dim(0), k = w.dim(1);
  const int64_t ld = round_up8(k);
  const bool direct = w.dtype == DType::kF32;  // f32 rows are read in place
  thread_local std::vector<float> scratch;
  if (!direct && scratch.size() < static_cast<size_t>(kTileRows * ld))
    scratch.resize(kTileRows * ld);
  for (int64_t m0 = 0; m0 < job.m; m0 += kRowBlock) {
    const int64_t mb = std::min(kRowBlock, job.m - m0);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t r0 = t * kTileRows;
      const int64_t nr = std::min(kTileRows, n - r0);
      const float* wp = direct ? w.as<float>() + r0 * k : scratch.data();
      const int64_t ldw = direct ? k : ld;
      const float* bias = job.bias != nullptr ? job.bias + r0 : nullptr;
#if LATHE_CPU_X86
      if (avx2) {
        if (mb <= kFusedMaxRows &&
            try_fused_tile_avx2(job.x + m0 * k, k, mb, w, r0, nr, k, job.y + m0 * n + r0, n, bias))
          continue;
        if (!direct) dequant_tile_avx2(w, r0, nr, k, scratch.data(), ld);
        tile_avx2(job.x + m0 * k, k, mb, wp, ldw, nr, k, job.y + m0 * n + r0, n, bias);
        continue;
      }
#endif
      if (!direct) dequant_tile_scalar(w, r0, nr, k, scratch.data(), ld);
      tile_scalar(job.x + m0 * k, k, mb, wp, ldw, nr, k, job.y + m0 * n + r0, n, bias);
    }
  }
}

}  // namespace

void linear(const float* x, int64_t m, const TensorView& w, const float* bias, float* y,
            ThreadPool& pool) {
  const WeightMatrix matrix = plain_matrix("", w);
  linear(x, m, matrix, bias, y, pool);
}

void linear(const float* x, int64_t m, const WeightMatrix& w, const float* bias, float* y,
            ThreadPool& pool) {
  const LinearGroupItem item{&w, bias, y};
  linear_group(x, m, &item, 1, pool);
}

bool is_supported_matrix(const WeightMatrix& w) {
  switch (w.format) {
    case WeightFormat::kDense:
    case WeightFormat::kGguf:
      return is_supported_weight_type(w.dtype);
    case WeightFormat::kInt:
    case WeightFormat::kFp8:
      return validate_weight_matrix(w).is_ok();
  }
  return false;
}

void linear_group(const float* x, int64_t m, const LinearGroupItem* items, int num_items,
                  ThreadPool& pool) {
  if (m <= 0 || num_items <= 0) return;
  if (num_items > kMaxLinearGroup) {  // several dispatches; results are the same
    linear_group(x, m, items, kMaxLinearGroup, pool);
    linear_group(x, m, items + kMaxLinearGroup, num_items - kMaxLinearGroup, pool);
    return;
  }
  const bool avx2 = cpu_isa() == CpuIsa::kAvx2;
  // Tiles of all weights in one index space, so one dispatch covers the group.
  int64_t offsets[kMaxLinearGroup + 1] = {0};
  LinearJob jobs[kMaxLinearGroup];
  for (int i = 0; i < num_items; ++i) {
    const WeightMatrix& w = *items[i].w;
    jobs[i] = LinearJob{x, m, &w, items[i].bias, items[i].y};
    offsets[i + 1] = offsets[i] + (w.n + kTileRows - 1) / kTileRows;
  }
  pool.parallel_for(offsets[num_items], [&](int64_t begin, int64_t end) {
    for (int i = 0; i < num_items; ++i) {
      const int64_t t0 = std::max(begin, offsets[i]), t1 = std::min(end, offsets[i + 1]);
      if (t0 < t1) run_tiles(jobs[i], t0 - offsets[i], t1 - offsets[i], avx2);
    }
  });
}

}  // namespace lathe::cpu
