// W4A16 decode products on tensor cores (M <= kQuantGemvMaxM): quant_linear.h's quant_gemv for
// 4-bit integer parts in the tile layout (int4_tiles.h). Included by quant_linear_int.cu only.
//
// A block computes one tile of 16 output rows for up to 8 activation rows, as mma.sync.m16n8k16
// with the weights as A and the activations as B (rows >= M are zero); its 4 (or 8) warps take
// contiguous runs of the tile's 64-input chunks and add their partial sums through shared memory.
// Per chunk a lane loads 16 bytes of codes (its A fragments of four k16 steps) and 32 bytes of its
// activation row g (its B fragments); the scales and zero points of the tile's rows are staged in
// shared memory once per block, so that the loop has no divisions and no scattered small loads.
// Decoding costs three instructions per two weights: a shift, a mask under the exponent of 128
// (bf16) or 1024 (f16), and a subtraction of (magic + zero), exact; the products are
// fp32-accumulated per chunk by the tensor cores and scaled once into fp32 sums. 8 chunks of codes
// are in flight per lane, copied by cp.async into the warp's ring in shared memory (a register ring
// of that depth stalls on the few load scoreboards); the first ones' codes and the scales are
// loaded before the wait on the previous kernel (PDL: weights are never written by the forward
// pass), activations after it.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "engine/backend/cuda/int4_tiles.h"
#include "engine/backend/cuda/mma.cuh"
#include "engine/backend/cuda/quant_decode.cuh"

namespace lathe::cuda::quant {

constexpr int kTileStages = 8;  // chunks of codes in flight per lane (8 measured faster than 16)

// Mma<T> (mma.cuh) plus the exact decode of a pair of 4-bit codes: ORed under the exponent of
// kMagicValue, minus (magic + zero point) by sub().
template <typename T>
struct TileMma;
template <>
struct TileMma<__nv_bfloat16> : Mma<__nv_bfloat16> {
  static constexpr uint32_t kMagic = 0x43004300u;  // bf16 128.0 in both halves
  static constexpr float kMagicValue = 128.0f;
  static __device__ __forceinline__ uint32_t sub(uint32_t a, uint32_t b) {
    const __nv_bfloat162 r = __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&a),
                                     *reinterpret_cast<const __nv_bfloat162*>(&b));
    return *reinterpret_cast<const uint32_t*>(&r);
  }
};
template <>
struct TileMma<__half> : Mma<__half> {
  static constexpr uint32_t kMagic = 0x64006400u;  // f16 1024.0 in both halves
  static constexpr float kMagicValue = 1024.0f;
  static __device__ __forceinline__ uint32_t sub(uint32_t a, uint32_t b) {
    const __half2 r =
        __hsub2(*reinterpret_cast<const __half2*>(&a), *reinterpret_cast<const __half2*>(&b));
    return *reinterpret_cast<const uint32_t*>(&r);
  }
};

// A scale group's values for one row of the tile, staged in shared memory once per block: the
// scale, and (magic + zero point) in both halves of the activation type (what the decode
// subtracts).
struct TileGroupRow {
  float scale;
  uint32_t zero_pair;
};

// The activations of a chunk are loaded kTileXAhead chunks ahead into registers (a ring of
// kTileXAhead + 1: they come from L1/L2).
constexpr int kTileXAhead = 3;

// Dynamic shared memory: per warp a ring of S chunks of codes (512 bytes each), then the part's
// groups' TileGroupRow for the tile's 16 rows.
template <int W>
size_t tile_smem_bytes(const QuantPart& p) {
  return static_cast<size_t>(W) * kTileStages * 32 * sizeof(uint4) +
         static_cast<size_t>(p.k / p.group_size) * kInt4TileRows * sizeof(TileGroupRow);
}
constexpr size_t kTileMaxSmem = 200 * 1024;  // parts needing more take the other kernels

// W: warps per block, each a contiguous run of the tile's chunks (QuantPart::int4_tile_warps).
// NT: groups of 8 activation rows (M <= 8 NT; groups past M are skipped): NT = 1 keeps the
// activations of the next chunks in a register ring; NT > 1 (batches up to kTileMaxM) loads each
// group's fragments when it is used and reuses the decoded weights for every group.
// Codes: kTileStages chunks in flight per lane, cp.async copies into the warp's ring in shared
// memory, one commit group per chunk (the hardware tracks the groups, so all stay in flight).
template <typename T, int W, int NT>
__global__ void __launch_bounds__(W * 32)
    quant_gemv_tiles_kernel(QuantPart p, const T* x, void* y, int64_t ldy, int m, bool out_f32) {
  using Op = TileMma<T>;
  constexpr int S = kTileStages, XD = kTileXAhead + 1;
  static_assert(S % XD == 0, "the activation ring's index must be static in the unrolled loop");
  extern __shared__ uint4 tile_smem[];
  __shared__ float red[kInt4TileRows][8 * NT];  // [output row][activation row], summed over warps
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  uint4* ring = tile_smem + warp * S * 32 + lane;  // stage u at ring[u * 32]
  TileGroupRow* groups_smem = reinterpret_cast<TileGroupRow*>(tile_smem + W * S * 32);
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kInt4TileRows;
  const int chunks = static_cast<int>(p.k / kInt4TileK);
  const int c0 = chunks * warp / W, c1 = chunks * (warp + 1) / W;
  const int groups = static_cast<int>(p.k / p.group_size);
  const int per_group = p.group_size / static_cast<int>(kInt4TileK);
  const int ngroups = (m + 7) / 8;  // activation groups in use (<= NT)

  // Codes of the first S chunks, before anything else (and before the PDL wait).
  const uint4* code_at = static_cast<const uint4*>(p.data) +
                         (static_cast<int64_t>(blockIdx.x) * chunks + c0) * 32 + lane;
#pragma unroll
  for (int u = 0; u < S; ++u) {
    if (c0 + u < c1) cp_async16(ring + u * 32, code_at + u * 32, 16);
    cp_async_commit();
  }
  code_at += S * 32;

  // Scales and zero points of the tile's rows into shared memory (entry i: group i / 16, row
  // i % 16); the reduction area zeroed.
  for (int i = threadIdx.x; i < groups * kInt4TileRows; i += W * 32) {
    const int grp = i / kInt4TileRows, r = i % kInt4TileRows;
    const int64_t at = (row0 + r) * groups + grp;
    TileGroupRow v;
    v.scale = p.scale_dtype == DType::kF32 ? static_cast<const float*>(p.scales)[at]
                                           : __half2float(static_cast<const __half*>(p.scales)[at]);
    const float z = p.zeros != nullptr ? static_cast<float>(p.zeros[at]) : 8.0f;
    v.zero_pair = Op::pack(Op::kMagicValue + z, Op::kMagicValue + z);
    groups_smem[i] = v;
  }
  for (int i = threadIdx.x; i < kInt4TileRows * 8 * NT; i += W * 32) (&red[0][0])[i] = 0.0f;
  pdl_wait();
  pdl_trigger();

  // Activations of row 8 nt + g (rows >= m read row 0 and are zeroed: no divergent loads).
  auto x_row = [&](int nt) {
    const int row = 8 * nt + g;
    return x + static_cast<int64_t>(row < m ? row : 0) * p.k + 16 * t;
  };
  auto load_x = [&](const T* at, bool has, uint4(&xs)[2]) {
    const uint4* xp = reinterpret_cast<const uint4*>(at);
    const uint4 a = xp[0], b = xp[1];
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    xs[0] = has ? a : zero;
    xs[1] = has ? b : zero;
  };
  const bool has_x = g < m;
  const T* x_at = x_row(0) + static_cast<int64_t>(c0) * kInt4TileK;  // NT == 1: the ring's next
  uint4 xr[NT == 1 ? XD : 1][2];
  if constexpr (NT == 1) {
#pragma unroll
    for (int u = 0; u < kTileXAhead; ++u)
      if (c0 + u < c1) {
        load_x(x_at, has_x, xr[u]);
        x_at += kInt4TileK;
      }
  }
  __syncthreads();

  int grp = c0 / per_group, in_group = c0 - grp * per_group;
  float acc[NT][4];  // per group: rows g, g (B cols 2t, 2t+1), g + 8, g + 8
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.0f;
  for (int c = c0; c < c1; c += S) {
#pragma unroll
    for (int u = 0; u < S; ++u) {
      const int cc = c + u;
      if (cc >= c1) break;
      cp_async_wait<S - 1>();  // chunk cc's group (the oldest) has landed
      const uint4 cur = ring[u * 32];
      if (cc + S < c1) cp_async16(ring + u * 32, code_at, 16);
      cp_async_commit();
      code_at += 32;
      const TileGroupRow lo = groups_smem[grp * kInt4TileRows + g];
      const TileGroupRow hi = groups_smem[grp * kInt4TileRows + g + 8];
      if (++in_group == per_group) {
        in_group = 0;
        ++grp;
      }
      const uint32_t cw[4] = {cur.x, cur.y, cur.z, cur.w};
      uint32_t a[4][4];  // [k16 step][register]
#pragma unroll
      for (int kb = 0; kb < 4; ++kb)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          a[kb][j] = Op::sub(((cw[kb] >> (4 * j)) & 0x000F000Fu) | Op::kMagic,
                             (j & 1) ? hi.zero_pair : lo.zero_pair);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        if (nt >= ngroups) break;
        uint4 xa, xb;
        if constexpr (NT == 1) {
          if (cc + kTileXAhead < c1) {
            load_x(x_at, has_x, xr[(u + kTileXAhead) % XD]);
            x_at += kInt4TileK;
          }
          xa = xr[u % XD][0];
          xb = xr[u % XD][1];
        } else {
          uint4 xs[2];
          load_x(x_row(nt) + static_cast<int64_t>(cc) * kInt4TileK, 8 * nt + g < m, xs);
          xa = xs[0];
          xb = xs[1];
        }
        const uint32_t xw[8] = {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w};
        float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int kb = 0; kb < 4; ++kb) Op::run(part, a[kb], xw[2 * kb], xw[2 * kb + 1]);
        acc[nt][0] = fmaf(lo.scale, part[0], acc[nt][0]);
        acc[nt][1] = fmaf(lo.scale, part[1], acc[nt][1]);
        acc[nt][2] = fmaf(hi.scale, part[2], acc[nt][2]);
        acc[nt][3] = fmaf(hi.scale, part[3], acc[nt][3]);
      }
    }
  }
  cp_async_wait<0>();
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    if (nt >= ngroups) break;
    atomicAdd(&red[g][8 * nt + 2 * t], acc[nt][0]);
    atomicAdd(&red[g][8 * nt + 2 * t + 1], acc[nt][1]);
    atomicAdd(&red[g + 8][8 * nt + 2 * t], acc[nt][2]);
    atomicAdd(&red[g + 8][8 * nt + 2 * t + 1], acc[nt][3]);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < kInt4TileRows * 8 * NT; i += W * 32) {
    const int r = i / (8 * NT), mi = i % (8 * NT);
    if (mi >= m) continue;
    const float v = red[r][mi];
    const int64_t out = mi * ldy + p.row_offset + row0 + r;
    if (out_f32)
      static_cast<float*>(y)[out] = v;
    else
      static_cast<T*>(y)[out] = from_float<T>(v);
  }
}

// Whether the tile kernel takes part p (else the one-row kernel reads its codes).
inline bool tiles_kernel_takes(const QuantPart& p) {
  return p.int4_tiles && tile_smem_bytes<8>(p) <= kTileMaxSmem;
}

template <typename T, int W, int NT>
cudaError_t launch_tiles(const QuantPart& p, const T* x, void* y, int64_t ldy, int64_t m,
                         bool out_f32, cudaStream_t stream) {
  const size_t smem = tile_smem_bytes<W>(p);
  // Above 48 KB of static (the reduction) and dynamic shared memory a kernel needs the opt-in.
  if (smem + sizeof(float) * kInt4TileRows * 8 * NT > 48 * 1024) {
    const cudaError_t e = cudaFuncSetAttribute(quant_gemv_tiles_kernel<T, W, NT>,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(kTileMaxSmem));
    if (e != cudaSuccess) return e;
  }
  return launch_kernel(quant_gemv_tiles_kernel<T, W, NT>,
                       dim3(static_cast<unsigned>(p.n / kInt4TileRows)), dim3(W * 32), smem, stream,
                       p, x, y, ldy, static_cast<int>(m), out_f32);
}

// m <= kTileMaxM activation rows.
inline cudaError_t launch_gemv_tiles(const QuantPart& p, DType act, const void* x, DType out_dtype,
                                     void* y, int64_t ldy, int64_t m, cudaStream_t stream) {
  cudaError_t err = cudaSuccess;
  const bool f32 = out_dtype == DType::kF32;
  LATHE_DISPATCH_ACT(act, T, {
    const T* xt = static_cast<const T*>(x);
    if (m > 8)
      err = launch_tiles<T, 8, kTileMaxM / 8>(p, xt, y, ldy, m, f32, stream);
    else if (p.int4_tile_warps == 4)
      err = launch_tiles<T, 4, 1>(p, xt, y, ldy, m, f32, stream);
    else
      err = launch_tiles<T, 8, 1>(p, xt, y, ldy, m, f32, stream);
  });
  return err;
}

}  // namespace lathe::cuda::quant
