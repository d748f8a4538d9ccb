#include "engine/backend/cuda/calib_awq.h"

#include <algorithm>

#include "engine/backend/cuda/cuda_common.h"
#include "engine/core/strings.h"

namespace lathe::cuda {
namespace {

constexpr unsigned kFull = 0xffffffffu;

// std::min / std::max of awq_search.cpp and int_quant.cpp, with their exact comparisons (a NaN
// second argument never wins, as there).
__device__ __forceinline__ float min_like_std(float a, float b) {
  return b < a ? b : a;
}
__device__ __forceinline__ float max_like_std(float a, float b) {
  return a < b ? b : a;
}
// std::clamp(v, lo, hi).
__device__ __forceinline__ float clamp_like_std(float v, float lo, float hi) {
  return v < lo ? lo : (hi < v ? hi : v);
}
// The min / max of a warp's values (every lane gets them). Exact, so any order gives the CPU's
// sequential result; a NaN stays only when every lane holds one (the CPU's NaN first element).
__device__ __forceinline__ float warp_min(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = min_like_std(v, __shfl_xor_sync(kFull, v, o));
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = max_like_std(v, __shfl_xor_sync(kFull, v, o));
  return v;
}

Status check_shape(const char* what, int64_t rows, int64_t k, int64_t group,
                   const CalibGrid& grid) {
  if (rows < 0 || k <= 0)
    return invalid_argument(strformat("%s: bad shape [%lld, %lld]", what,
                                      static_cast<long long>(rows), static_cast<long long>(k)));
  if (group > 0 && k % group != 0)
    return invalid_argument(strformat("%s: group size %lld does not divide %lld columns", what,
                                      static_cast<long long>(group), static_cast<long long>(k)));
  if (grid.bits != 4 && grid.bits != 8)
    return invalid_argument(strformat("%s: bits must be 4 or 8, got %d", what, grid.bits));
  return Status();
}

// ---------------------------------------------------------------------------------------------
// Fake quantization: one warp per (row, group), grid-stride over the pairs. Lane l handles the
// group's columns l, l + 32, ...; kSmall (group <= 128) keeps them in registers between the
// min / max pass and the quantization pass, otherwise the second pass reads them again.

constexpr int kFqWarps = 8;

template <bool kSmall>
__global__ void __launch_bounds__(kFqWarps * 32)
    fake_quantize_kernel(const float* w, const float* __restrict__ s, float* out, int64_t rows,
                         int64_t k, int64_t g, int64_t ng, CalibGrid grid) {
  const int lane = threadIdx.x & 31;
  const int32_t max_code = (1 << grid.bits) - 1;
  const int64_t pairs = rows * ng;
  for (int64_t pr = static_cast<int64_t>(blockIdx.x) * kFqWarps + (threadIdx.x >> 5); pr < pairs;
       pr += static_cast<int64_t>(gridDim.x) * kFqWarps) {
    const int64_t r = pr / ng, gi = pr - r * ng;
    const float* wg = w + r * k + gi * g;
    const float* sg = s + gi * g;
    float* og = out + r * k + gi * g;
    // quantize_int_rtn starts its min / max at the group's first value.
    const float first = __fmul_rn(wg[0], sg[0]);
    float lo = first, hi = first;
    if constexpr (kSmall) {
      float v[4];
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int64_t j = lane + 32 * c;
        v[c] = j < g ? __fmul_rn(wg[j], sg[j]) : first;
        lo = min_like_std(lo, v[c]);
        hi = max_like_std(hi, v[c]);
      }
      const CalibGroupParams p = calib_grid_params(warp_min(lo), warp_max(hi), grid);
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int64_t j = lane + 32 * c;
        if (j < g) og[j] = __fdiv_rn(calib_value(calib_code(v[c], p, max_code), p), sg[j]);
      }
    } else {
      for (int64_t j = lane; j < g; j += 32) {
        const float v = __fmul_rn(wg[j], sg[j]);
        lo = min_like_std(lo, v);
        hi = max_like_std(hi, v);
      }
      const CalibGroupParams p = calib_grid_params(warp_min(lo), warp_max(hi), grid);
      for (int64_t j = lane; j < g; j += 32) {
        const float v = __fmul_rn(wg[j], sg[j]);
        og[j] = __fdiv_rn(calib_value(calib_code(v, p, max_code), p), sg[j]);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Clip search. A CTA takes one group gi and a chunk of up to kMaxRows rows. dot4 splits a group's
// columns into four chains (chain c: columns 4m + c for m < M = g / 4; the g - 4M tail columns
// end chain 0), each summed in column order. Warp w owns chain w % 4 of the 64 tokens
// 64 (w / 4) + lane + 32 k (k < 2), so the CTA's 8 warps cover a tile of 128 tokens, and every
// lane of a warp reads the same candidate weight at a time (a shared-memory broadcast, used for
// two tokens). A lane holds its tokens' chain of x (as doubles) for up to MT columns in registers
// (up to 255 registers: one CTA of 8 warps per SM); the candidates' weights for those
// columns sit in shared memory ([cand][chain][m]): candidate 0 is w itself (the original outputs),
// candidates 1 .. 10 the clipped, fake-quantized weights of ten consecutive steps. The four chain
// sums of each token and candidate meet in shared memory, are combined (s0 + s1) + (s2 + s3), and
// the squared differences are added to the row's errors by ten lanes of one warp in token order
// (the CPU's order). Groups of more than 4 MT columns (per-channel) go through several column
// tiles, x reloaded for each; more than 10 steps run in batches of 10; more than 128 tokens in
// tiles of 128.
//
// The CTA works through the items (row, column tile) of a token tile in order; one iteration:
//   1. accumulate the item from candidate buffer item % 2; at a row's end, store the chain sums
//      (buffer row % 2);
//   2. the squared differences of the row whose chain sums were stored before the last barrier;
//   3. build the next item's candidates into the other buffer;
//   4. __syncthreads;
//   5. one warp adds the squares of step 2 to that row's errors.
// An extra iteration at the end drains the last row. Each buffer is next written only after a
// barrier that its readers pass once done.

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kTokPerLane = 2;  // each candidate weight read serves two tokens
constexpr int kTokTile = kWarps / 4 * 32 * kTokPerLane;  // tokens per tile
constexpr int kBatch = 10;                               // steps per pass
constexpr int kCand = kBatch + 1;                        // w itself + the steps
constexpr int kMaxRows = 32;                             // rows per CTA
constexpr int kMaxTail = 3;

// Shared memory of the kernel with MT columns per chain and tile, in doubles / floats / ints.
template <int MT>
struct ClipLayout {
  static_assert(MT % 2 == 0, "the candidates are read in 16-byte pairs");
  static constexpr int kQwBuf = kCand * 4 * MT;
  static constexpr int kTailBuf = kCand * (kMaxTail + 1);
  static constexpr int kPartBuf = 4 * kCand * kTokTile;
  static constexpr int kSqStride = kTokTile + 1;  // ten lanes read ten steps without conflicts
  static constexpr int kSqBuf = kBatch * kSqStride;
  // doubles
  static constexpr int kQw = 0;
  static constexpr int kTail = kQw + 2 * kQwBuf;
  static constexpr int kPart = kTail + 2 * kTailBuf;
  static constexpr int kSq = kPart + 2 * kPartBuf;
  static constexpr int kErr = kSq + 2 * kSqBuf;
  static constexpr int kBestErr = kErr + kMaxRows * kBatch;
  static constexpr int kDoubles = kBestErr + kMaxRows;
  // floats after the doubles
  static constexpr int kAmax = 0;
  static constexpr int kMin = kAmax + kMaxRows;
  static constexpr int kMax = kMin + kMaxRows;
  static constexpr int kBestMv = kMax + kMaxRows;
  static constexpr int kMv = kBestMv + kMaxRows;
  static constexpr int kScale = kMv + kMaxRows * kBatch;
  static constexpr int kFloats = kScale + kMaxRows * kBatch;
  // int32 after the floats: zero points
  static constexpr int kInts = kMaxRows * kBatch;
  static constexpr size_t kBytes =
      kDoubles * sizeof(double) + kFloats * sizeof(float) + kInts * sizeof(int32_t);
};

struct ClipArgs {
  const float* w = nullptr;  // [rows, k]
  const float* x = nullptr;  // [tokens, k]
  float* best = nullptr;     // [rows, num_groups]
  int64_t rows = 0, k = 0, tokens = 0, group = 0, num_groups = 0;
  int32_t m_main = 0;  // M = group / 4
  int32_t tail = 0;    // group - 4 M
  int32_t rows_per_cta = 0;
  int32_t clip_grid = 20;
  int32_t steps = 1;  // >= 1
  CalibGrid grid;
};

template <int MT>
struct ClipSmem {
  double* qw;                           // [2][kCand][4][MT]
  double* qtail;                        // [2][kCand][kMaxTail + 1]
  double* part;                         // [2][4][kCand][kTokTile]: chain sums
  double* sq;                           // [2][kBatch][kSqStride]
  double* err;                          // [kMaxRows][kBatch]: the batch's error sums so far
  double* best_err;                     // [kMaxRows]
  float *amax, *wmin, *wmax, *best_mv;  // [kMaxRows]
  float *mv, *scale;                    // [kMaxRows][kBatch]
  int32_t* zero;                        // [kMaxRows][kBatch]

  __device__ explicit ClipSmem(unsigned char* raw) {
    using L = ClipLayout<MT>;
    double* d = reinterpret_cast<double*>(raw);
    qw = d + L::kQw;
    qtail = d + L::kTail;
    part = d + L::kPart;
    sq = d + L::kSq;
    err = d + L::kErr;
    best_err = d + L::kBestErr;
    float* f = reinterpret_cast<float*>(d + L::kDoubles);
    amax = f + L::kAmax;
    wmin = f + L::kMin;
    wmax = f + L::kMax;
    best_mv = f + L::kBestMv;
    mv = f + L::kMv;
    scale = f + L::kScale;
    zero = reinterpret_cast<int32_t*>(f + L::kFloats);
  }
};

// Candidate `cand` of the weight wv of row rr (batch-relative step cand - 1): wv itself, or
// int_value(int_code(clamp(wv, -mv, mv))) on the step's grid; 0 for candidates past the batch.
template <int MT>
__device__ __forceinline__ double candidate(const ClipSmem<MT>& sm, float wv, int cand, int rr,
                                            int nb, int32_t max_code) {
  if (cand == 0) return static_cast<double>(wv);
  const int i = cand - 1;
  if (i >= nb) return 0.0;
  const int q = rr * kBatch + i;
  const float mv = sm.mv[q];
  CalibGroupParams p;
  p.scale = sm.scale[q];
  p.zero = sm.zero[q];
  return static_cast<double>(calib_value(calib_code(clamp_like_std(wv, -mv, mv), p, max_code), p));
}

// The candidates of item (row rr, column tile `tile`) into buffer `buf` (all threads).
template <int MT>
__device__ __forceinline__ void build_candidates(const ClipArgs& a, const ClipSmem<MT>& sm,
                                                 int64_t r0, int64_t col0, int rr, int tile,
                                                 int ntiles, int buf, int nb, int32_t max_code) {
  using L = ClipLayout<MT>;
  constexpr int kCols = 4 * MT;
  const float* wr = a.w + (r0 + rr) * a.k + col0;
  const int m0 = tile * MT;
  const int mcount = min(MT, a.m_main - m0);
  double* q = sm.qw + buf * L::kQwBuf;
  for (int it = threadIdx.x; it < kCols * kCand; it += kThreads) {
    const int p = it % kCols, cand = it / kCols;
    const int m = p >> 2, c = p & 3;
    double v = 0.0;
    if (m < mcount) v = candidate(sm, wr[4 * (m0 + m) + c], cand, rr, nb, max_code);
    q[(cand * 4 + c) * MT + m] = v;
  }
  if (tile == ntiles - 1 && a.tail > 0) {
    double* t = sm.qtail + buf * L::kTailBuf;
    for (int it = threadIdx.x; it < kCand * a.tail; it += kThreads) {
      const int cand = it / a.tail, e = it % a.tail;
      t[cand * (kMaxTail + 1) + e] = candidate(sm, wr[4 * a.m_main + e], cand, rr, nb, max_code);
    }
  }
}

// This lane's chain values of x for column tile `tile` (zeros past the group or the tokens).
template <int MT>
__device__ __forceinline__ void load_x(double (&xr)[MT], const float* xt, bool valid, int m_main,
                                       int tile, int chain) {
  const int m0 = tile * MT;
#pragma unroll
  for (int m = 0; m < MT; ++m)
    xr[m] = valid && m0 + m < m_main ? static_cast<double>(xt[4 * (m0 + m) + chain]) : 0.0;
}

// The squared differences sq[i][t] = (dot_{i+1} - dot_0)^2 of the row whose chain sums are in
// `part`, dot = (s0 + s1) + (s2 + s3) (all threads).
__device__ __forceinline__ void squares(const double* part, double* sq, int tile_tokens, int nb,
                                        int sq_stride) {
  const int t = threadIdx.x % kTokTile;
  if (t >= tile_tokens) return;
  constexpr int kChain = kCand * kTokTile;
  const auto dot = [&](int cand) {
    const double* p = part + cand * kTokTile + t;
    return __dadd_rn(__dadd_rn(p[0], p[kChain]), __dadd_rn(p[2 * kChain], p[3 * kChain]));
  };
  const double org = dot(0);
  for (int i = threadIdx.x / kTokTile; i < nb; i += kThreads / kTokTile) {
    const double d = __dsub_rn(dot(i + 1), org);
    sq[i * sq_stride + t] = __dmul_rn(d, d);
  }
}

template <int MT>
__global__ void __launch_bounds__(kThreads, 1) clip_search_kernel(ClipArgs a) {
  using L = ClipLayout<MT>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const ClipSmem<MT> sm(smem_raw);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int chain = warp & 3;
  const int t_base = (warp >> 2) * 32 * kTokPerLane + lane;  // tokens t_base + 32 k
  const int64_t gi = blockIdx.y;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * a.rows_per_cta;
  const int nrows = static_cast<int>(min(static_cast<int64_t>(a.rows_per_cta), a.rows - r0));
  const int64_t col0 = gi * a.group;
  const int ntiles = a.m_main > 0 ? (a.m_main + MT - 1) / MT : 1;
  const bool resident = ntiles == 1;  // x stays in registers across the rows
  const int32_t max_code = (1 << a.grid.bits) - 1;

  // Per row: max |w| (awq_search_clip's amax, from 0) and the min / max of w; the clamped
  // values' min / max are then clamp(min w), clamp(max w), clamp being monotone.
  for (int rr = warp; rr < nrows; rr += kWarps) {
    const float* wr = a.w + (r0 + rr) * a.k + col0;
    float amax = 0.f, lo = INFINITY, hi = -INFINITY;
    for (int64_t j = lane; j < a.group; j += 32) {
      const float v = wr[j];
      amax = max_like_std(amax, fabsf(v));
      lo = min_like_std(lo, v);
      hi = max_like_std(hi, v);
    }
    amax = warp_max(amax);
    lo = warp_min(lo);
    hi = warp_max(hi);
    if (lane == 0) {
      sm.amax[rr] = amax;
      sm.wmin[rr] = lo;
      sm.wmax[rr] = hi;
      sm.best_err[rr] = INFINITY;
      sm.best_mv[rr] = amax;
    }
  }
  __syncthreads();

  for (int b0 = 0; b0 < a.steps; b0 += kBatch) {
    const int nb = min(kBatch, a.steps - b0);
    // The batch's ranges and grids per row; its error sums start at 0.
    for (int q = tid; q < nrows * kBatch; q += kThreads) {
      const int rr = q / kBatch, i = q % kBatch;
      float mv = 0.f, scale = 1.f;
      int32_t zero = 0;
      if (i < nb) {
        const float step = static_cast<float>(b0 + i);
        mv = __fmul_rn(sm.amax[rr],
                       __fsub_rn(1.f, __fdiv_rn(step, static_cast<float>(a.clip_grid))));
        const float cmin = clamp_like_std(sm.wmin[rr], -mv, mv);
        const float cmax = clamp_like_std(sm.wmax[rr], -mv, mv);
        // lo = min(0, values...), hi = max(0, values...) as the CPU's loop from lo = hi = 0.
        const CalibGroupParams p =
            calib_grid_params(min_like_std(0.f, cmin), max_like_std(0.f, cmax), a.grid);
        scale = p.scale;
        zero = p.zero;
      }
      sm.mv[q] = mv;
      sm.scale[q] = scale;
      sm.zero[q] = zero;
      sm.err[q] = 0.0;
    }
    __syncthreads();

    for (int64_t t0 = 0; t0 < a.tokens; t0 += kTokTile) {
      const int tile_tokens = static_cast<int>(min(static_cast<int64_t>(kTokTile), a.tokens - t0));
      bool valid[kTokPerLane];
      const float* xt[kTokPerLane];
      double xr[kTokPerLane][MT];
      double xtail[kTokPerLane][kMaxTail];
#pragma unroll
      for (int k = 0; k < kTokPerLane; ++k) {
        const int t = t_base + 32 * k;
        valid[k] = t < tile_tokens;
        xt[k] = a.x + (t0 + (valid[k] ? t : 0)) * a.k + col0;
#pragma unroll
        for (int e = 0; e < kMaxTail; ++e)
          xtail[k][e] = valid[k] && chain == 0 && e < a.tail
                            ? static_cast<double>(xt[k][4 * static_cast<int64_t>(a.m_main) + e])
                            : 0.0;
        if (resident) load_x(xr[k], xt[k], valid[k], a.m_main, 0, chain);
      }

      const int nitems = nrows * ntiles;
      build_candidates(a, sm, r0, col0, 0, 0, ntiles, 0, nb, max_code);
      __syncthreads();
      double acc[kTokPerLane][kCand];
      int pending = -1;  // the row whose chain sums were stored before the last barrier
      for (int item = 0; item <= nitems; ++item) {
        bool row_end = false;
        int rr = 0;
        if (item < nitems) {
          rr = item / ntiles;
          const int tile = item % ntiles, buf = item & 1;
          if (tile == 0) {
#pragma unroll
            for (int k = 0; k < kTokPerLane; ++k)
#pragma unroll
              for (int c = 0; c < kCand; ++c) acc[k][c] = 0.0;
          }
          if (!resident) {
#pragma unroll
            for (int k = 0; k < kTokPerLane; ++k)
              load_x(xr[k], xt[k], valid[k], a.m_main, tile, chain);
          }
          // dot4's chain: acc += x * w in column order (the product is exact in double, so the
          // FMA rounds as the CPU's multiply-add does).
          const double* q = sm.qw + buf * L::kQwBuf + chain * MT;
#pragma unroll
          for (int m = 0; m < MT; m += 2) {
#pragma unroll
            for (int c = 0; c < kCand; ++c) {
              const double2 v = *reinterpret_cast<const double2*>(q + c * 4 * MT + m);
#pragma unroll
              for (int k = 0; k < kTokPerLane; ++k) {
                acc[k][c] = __fma_rn(xr[k][m], v.x, acc[k][c]);
                acc[k][c] = __fma_rn(xr[k][m + 1], v.y, acc[k][c]);
              }
            }
          }
          row_end = tile == ntiles - 1;
          if (row_end) {
            if (chain == 0) {  // the tail columns end chain 0
              const double* qt = sm.qtail + buf * L::kTailBuf;
#pragma unroll
              for (int e = 0; e < kMaxTail; ++e) {
                if (e < a.tail) {
#pragma unroll
                  for (int c = 0; c < kCand; ++c)
#pragma unroll
                    for (int k = 0; k < kTokPerLane; ++k)
                      acc[k][c] = __fma_rn(xtail[k][e], qt[c * (kMaxTail + 1) + e], acc[k][c]);
                }
              }
            }
            double* p = sm.part + (rr & 1) * L::kPartBuf + chain * kCand * kTokTile + t_base;
#pragma unroll
            for (int c = 0; c < kCand; ++c)
#pragma unroll
              for (int k = 0; k < kTokPerLane; ++k) p[c * kTokTile + 32 * k] = acc[k][c];
          }
        }
        const int sq_row = pending;
        if (sq_row >= 0)
          squares(sm.part + (sq_row & 1) * L::kPartBuf, sm.sq + (sq_row & 1) * L::kSqBuf,
                  tile_tokens, nb, L::kSqStride);
        pending = row_end ? rr : -1;
        if (item + 1 < nitems) {
          const int next = item + 1;
          build_candidates(a, sm, r0, col0, next / ntiles, next % ntiles, ntiles, next & 1, nb,
                           max_code);
        }
        __syncthreads();
        // The squares in token order (lane i: step i), as the CPU's err += d * d.
        if (sq_row >= 0 && warp == sq_row % kWarps && lane < nb) {
          const double* col = sm.sq + (sq_row & 1) * L::kSqBuf + lane * L::kSqStride;
          double e = sm.err[sq_row * kBatch + lane];
          for (int u = 0; u < tile_tokens; ++u) e = __dadd_rn(e, col[u]);
          sm.err[sq_row * kBatch + lane] = e;
        }
      }
      __syncthreads();  // the last row's sums before the buffers are reused
    }

    // err /= tokens; the first strictly smaller error wins, over the steps in order.
    for (int rr = tid; rr < nrows; rr += kThreads) {
      double be = sm.best_err[rr];
      float bm = sm.best_mv[rr];
      for (int i = 0; i < nb; ++i) {
        const double e = __ddiv_rn(sm.err[rr * kBatch + i], static_cast<double>(a.tokens));
        if (e < be) {
          be = e;
          bm = sm.mv[rr * kBatch + i];
        }
      }
      sm.best_err[rr] = be;
      sm.best_mv[rr] = bm;
    }
    __syncthreads();
  }
  for (int rr = tid; rr < nrows; rr += kThreads)
    a.best[(r0 + rr) * a.num_groups + gi] = sm.best_mv[rr];
}

template <int MT>
Status launch_clip(const ClipArgs& a, cudaStream_t stream) {
  constexpr size_t kBytes = ClipLayout<MT>::kBytes;
  LATHE_CUDA_TRY(cudaFuncSetAttribute(clip_search_kernel<MT>,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(kBytes)));
  const dim3 grid(static_cast<unsigned>(ceil_div(a.rows, a.rows_per_cta)),
                  static_cast<unsigned>(a.num_groups));
  clip_search_kernel<MT><<<grid, kThreads, kBytes, stream>>>(a);
  return check_launch("awq clip_search_kernel");
}

}  // namespace

Status awq_fake_quantize(const float* w, const float* s, int64_t rows, int64_t k, int64_t group,
                         const CalibGrid& grid, float* out, cudaStream_t stream) {
  LATHE_RETURN_IF_ERROR(check_shape("awq_fake_quantize", rows, k, group, grid));
  if (rows == 0) return Status();
  const int64_t g = group > 0 ? group : k, ng = k / g;
  const int64_t pairs = rows * ng;
  const unsigned blocks =
      static_cast<unsigned>(std::min<int64_t>(ceil_div(pairs, kFqWarps), int64_t{1} << 20));
  if (g <= 128)
    fake_quantize_kernel<true>
        <<<blocks, kFqWarps * 32, 0, stream>>>(w, s, out, rows, k, g, ng, grid);
  else
    fake_quantize_kernel<false>
        <<<blocks, kFqWarps * 32, 0, stream>>>(w, s, out, rows, k, g, ng, grid);
  return check_launch("awq fake_quantize_kernel");
}

Status awq_clip_search(const float* w, int64_t rows, int64_t k, const float* x, int64_t tokens,
                       int64_t group, const CalibGrid& grid, int clip_grid, int steps, float* best,
                       cudaStream_t stream) {
  LATHE_RETURN_IF_ERROR(check_shape("awq_clip_search", rows, k, group, grid));
  if (tokens <= 0)
    return invalid_argument("awq_clip_search: the search needs at least one input row");
  if (rows == 0) return Status();
  ClipArgs a;
  a.w = w;
  a.x = x;
  a.best = best;
  a.rows = rows;
  a.k = k;
  a.tokens = tokens;
  a.group = group > 0 ? group : k;
  a.num_groups = k / a.group;
  if (a.num_groups > 65535)
    return invalid_argument("awq_clip_search: more than 65535 groups per row");
  a.m_main = static_cast<int32_t>(a.group / 4);
  a.tail = static_cast<int32_t>(a.group - 4 * a.m_main);
  a.clip_grid = clip_grid;
  a.steps = std::max(steps, 1);
  a.grid = grid;
  // Rows per CTA: enough CTAs for two per SM where the shape allows, at most kMaxRows.
  int device = 0, sms = 132;
  LATHE_CUDA_TRY(cudaGetDevice(&device));
  LATHE_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t chunks =
      std::max<int64_t>(1, ceil_div(2 * static_cast<int64_t>(sms), a.num_groups));
  a.rows_per_cta = static_cast<int32_t>(std::clamp<int64_t>(ceil_div(rows, chunks), 1, kMaxRows));
  if (a.m_main <= 8) return launch_clip<8>(a, stream);
  if (a.m_main <= 16) return launch_clip<16>(a, stream);
  return launch_clip<32>(a, stream);
}

}  // namespace lathe::cuda
