#include "engine/backend/cuda/calib_gptq.h"

#include <algorithm>

#include "engine/backend/cuda/cuda_common.h"

namespace lathe::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kSlots = 4;  // columns of a piece per lane
constexpr int kWarpsPerBlock = 4;
static_assert(kSlots * 32 == kGptqMaxBlock);

// Blocks for a grid-stride loop over `count` elements.
unsigned grid_for(int64_t count) {
  return static_cast<unsigned>(std::min<int64_t>(ceil_div(count, kThreads), 65536));
}
// A 2D grid-stride loop over [outer, inner]: x strides the inner index, y the outer one.
dim3 grid_2d(int64_t outer, int64_t inner) {
  return dim3(static_cast<unsigned>(std::min<int64_t>(ceil_div(inner, kThreads), 4096)),
              static_cast<unsigned>(std::min<int64_t>(outer, 65535)));
}
#define LATHE_FOR_OUTER(o, n) for (int64_t o = blockIdx.y; o < (n); o += gridDim.y)
#define LATHE_FOR_INNER(i, n)                                                            \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

__global__ void flag_non_finite_kernel(const double* __restrict__ v, int64_t count,
                                       int32_t* __restrict__ flag) {
  bool bad = false;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    bad |= !isfinite(v[i]);
  if (bad) *flag = 1;
}

// m is column-major: (r, c) at r + c * n.
__global__ void gather_reversed_kernel(const double* __restrict__ h,
                                       const int32_t* __restrict__ perm, double* __restrict__ m,
                                       int64_t n) {
  LATHE_FOR_OUTER(c, n) {
    const int64_t b = perm[n - 1 - c];
    LATHE_FOR_INNER(r, n) {
      const int64_t a = perm[n - 1 - r];
      double v = h[a * n + b];
      if (a == b && v == 0.0) v = 1.0;
      m[r + c * n] = v;
    }
  }
}

__global__ void add_diagonal_kernel(double* __restrict__ a, int64_t n, int64_t ld, double v) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    a[i + i * ld] = __dadd_rn(a[i + i * ld], v);
}

// 32 x 32 output tiles of u through shared memory: with S the row-major view of minv
// (S[x][y] = minv[x * n + y] = M^-1(y, x)), u[i][j] = M^-1(n-1-i, n-1-j) = S[n-1-j][n-1-i]; both
// the reads (along n-1-i) and the writes (along j) are contiguous across threadIdx.x.
constexpr int kTile = 32;
__global__ void upper_from_reversed_inverse_kernel(const double* __restrict__ minv,
                                                   double* __restrict__ u, int64_t n) {
  __shared__ double tile[kTile][kTile + 1];
  const int64_t j0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const int64_t i0 = static_cast<int64_t>(blockIdx.y) * kTile;
  const int tx = threadIdx.x;
  for (int ty = threadIdx.y; ty < kTile; ty += blockDim.y) {
    // tile[ty][tx] = S[n-1-(j0+ty)][n-1-(i0+tx)] = u[i0+tx][j0+ty]
    const int64_t j = j0 + ty, i = i0 + tx;
    tile[ty][tx] = (i < n && j < n) ? minv[(n - 1 - j) * n + (n - 1 - i)] : 0.0;
  }
  __syncthreads();
  for (int ty = threadIdx.y; ty < kTile; ty += blockDim.y) {
    const int64_t i = i0 + ty, j = j0 + tx;
    if (i < n && j < n) u[i * n + j] = j >= i ? tile[tx][ty] : 0.0;
  }
}

__global__ void permute_weights_kernel(const float* __restrict__ w,
                                       const int32_t* __restrict__ perm,
                                       const uint8_t* __restrict__ dead, double* __restrict__ wp,
                                       int64_t rows, int64_t k) {
  LATHE_FOR_OUTER(r, rows) {
    LATHE_FOR_INNER(i, k) {
      const int64_t src = perm[i];
      wp[r * k + i] = dead[src] ? 0.0 : static_cast<double>(w[r * k + src]);
    }
  }
}

__global__ void unpermute_codes_kernel(const uint8_t* __restrict__ codes_p,
                                       const int32_t* __restrict__ perm,
                                       uint8_t* __restrict__ codes, int64_t rows, int64_t k) {
  LATHE_FOR_OUTER(r, rows) {
    LATHE_FOR_INNER(i, k) codes[r * k + perm[i]] = codes_p[r * k + i];
  }
}

__device__ __forceinline__ float warp_min_f(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fminf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_max_f(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// One warp per row. Lane l holds the piece's columns s1 + l + 32 c (c < kSlots) in registers and
// walks the piece's columns in order: column j = s1 + 32 s + l is owned by lane l, slot s; its
// weight is broadcast, every lane computes the same code and error, and each lane updates the
// columns after j that it holds. Slots are indexed by unrolled constants only (no local memory).
__global__ void __launch_bounds__(kWarpsPerBlock * 32) gptq_block_kernel(GptqBlockArgs a) {
  const int lane = threadIdx.x & 31;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (r >= a.rows) return;  // the whole warp
  const int64_t k = a.k, s1 = a.s1, s2 = a.s2, g = a.group;
  double* wr = a.w + r * k;
  const int32_t max_code = (1 << a.grid.bits) - 1;

  double wv[kSlots], ev[kSlots];
  int32_t cv[kSlots];
#pragma unroll
  for (int c = 0; c < kSlots; ++c) {
    const int64_t t = s1 + lane + 32 * c;
    wv[c] = t < s2 ? wr[t] : 0.0;
    ev[c] = 0.0;
    cv[c] = 0;
  }
  CalibGroupParams p;
  int64_t next_group = s1 - s1 % g;  // the start of the group s1 is in
  if (next_group < s1) {             // the piece continues a group: its parameters so far
    const int64_t gi = r * a.num_groups + s1 / g;
    p.scale = a.scales[gi];
    p.zero = a.zeros[gi];
    next_group += g;
  }
  double total = 0.0;
#pragma unroll
  for (int s = 0; s < kSlots; ++s) {
    for (int l = 0; l < 32; ++l) {
      const int64_t j = s1 + 32 * s + l;
      if (j >= s2) break;
      if (j == next_group) {  // a group starts: its grid from its current weights
        const int64_t gend = j + g < k ? j + g : k;
        float lo = INFINITY, hi = -INFINITY;
#pragma unroll
        for (int c = 0; c < kSlots; ++c) {
          const int64_t t = s1 + lane + 32 * c;
          if (t >= j && t < gend && t < s2) {
            const float f = __double2float_rn(wv[c]);
            lo = fminf(lo, f);
            hi = fmaxf(hi, f);
          }
        }
        for (int64_t t = s2 + lane; t < gend; t += 32) {
          const float f = __double2float_rn(wr[t]);
          lo = fminf(lo, f);
          hi = fmaxf(hi, f);
        }
        lo = warp_min_f(lo);
        hi = warp_max_f(hi);
        p = calib_grid_params(lo, hi, a.grid);
        if (lane == 0) {
          const int64_t gi = r * a.num_groups + j / g;
          a.scales[gi] = p.scale;
          a.zeros[gi] = p.zero;
        }
        next_group += g;
      }
      const double wj = __shfl_sync(0xffffffffu, wv[s], l);
      const int32_t code = calib_code(__double2float_rn(wj), p, max_code);
      const double deq = static_cast<double>(calib_value(code, p));
      const double* uj = a.u + j * k;
      const double ujj = __ldg(uj + j);
      const double d = __dsub_rn(wj, deq);
      const double e = __ddiv_rn(d, ujj);
      total = __dadd_rn(total, __ddiv_rn(__ddiv_rn(__dmul_rn(d, d), __dmul_rn(ujj, ujj)), 2.0));
      if (lane == l) {
        cv[s] = code;
        ev[s] = e;
      }
#pragma unroll
      for (int c = 0; c < kSlots; ++c) {
        const int64_t t = s1 + lane + 32 * c;
        if (t > j && t < s2) wv[c] = __dsub_rn(wv[c], __dmul_rn(e, __ldg(uj + t)));
      }
    }
  }
#pragma unroll
  for (int c = 0; c < kSlots; ++c) {
    const int64_t t = s1 + lane + 32 * c;
    if (t < s2) {
      a.codes_p[r * k + t] = static_cast<uint8_t>(cv[c]);
      a.err[r * a.ld_err + (t - s1)] = ev[c];
    }
  }
  if (lane == 0) a.loss[r] = __dadd_rn(a.loss[r], total);
}

}  // namespace

Status calib_flag_non_finite(const double* values, int64_t count, int32_t* flag,
                             cudaStream_t stream) {
  if (count <= 0) return Status();
  flag_non_finite_kernel<<<grid_for(count), kThreads, 0, stream>>>(values, count, flag);
  return check_launch("flag_non_finite_kernel");
}

Status gptq_gather_reversed(const double* h, const int32_t* perm, double* m, int64_t n,
                            cudaStream_t stream) {
  if (n <= 0) return Status();
  gather_reversed_kernel<<<grid_2d(n, n), kThreads, 0, stream>>>(h, perm, m, n);
  return check_launch("gather_reversed_kernel");
}

Status gptq_add_diagonal(double* a, int64_t n, int64_t ld, double v, cudaStream_t stream) {
  if (n <= 0) return Status();
  add_diagonal_kernel<<<grid_for(n), kThreads, 0, stream>>>(a, n, ld, v);
  return check_launch("add_diagonal_kernel");
}

Status gptq_upper_from_reversed_inverse(const double* minv, double* u, int64_t n,
                                        cudaStream_t stream) {
  if (n <= 0) return Status();
  const dim3 grid(static_cast<unsigned>(ceil_div(n, kTile)),
                  static_cast<unsigned>(ceil_div(n, kTile)));
  upper_from_reversed_inverse_kernel<<<grid, dim3(kTile, 8), 0, stream>>>(minv, u, n);
  return check_launch("upper_from_reversed_inverse_kernel");
}

Status gptq_permute_weights(const float* w, const int32_t* perm, const uint8_t* dead, double* wp,
                            int64_t rows, int64_t k, cudaStream_t stream) {
  if (rows <= 0 || k <= 0) return Status();
  permute_weights_kernel<<<grid_2d(rows, k), kThreads, 0, stream>>>(w, perm, dead, wp, rows, k);
  return check_launch("permute_weights_kernel");
}

Status gptq_unpermute_codes(const uint8_t* codes_p, const int32_t* perm, uint8_t* codes,
                            int64_t rows, int64_t k, cudaStream_t stream) {
  if (rows <= 0 || k <= 0) return Status();
  unpermute_codes_kernel<<<grid_2d(rows, k), kThreads, 0, stream>>>(codes_p, perm, codes, rows, k);
  return check_launch("unpermute_codes_kernel");
}

Status gptq_quantize_block(const GptqBlockArgs& a, cudaStream_t stream) {
  if (a.s2 - a.s1 > kGptqMaxBlock || a.s2 <= a.s1 || a.group <= 0)
    return internal_error("gptq_quantize_block: a piece must have 1 to 128 columns and a group");
  if (a.rows <= 0) return Status();
  const unsigned blocks = static_cast<unsigned>(ceil_div(a.rows, kWarpsPerBlock));
  gptq_block_kernel<<<blocks, kWarpsPerBlock * 32, 0, stream>>>(a);
  return check_launch("gptq_block_kernel");
}

}  // namespace lathe::cuda
