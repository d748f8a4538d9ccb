// W4A16 decode products on tensor cores (M <= kQuantGemvMaxM): quant_linear.h's quant_gemv for
// 4-bit integer parts in the tile layout (int4_tiles.h). Included by quant_linear_int.cu only.
//
// A block computes one tile of 16 output rows for up to 8 activation rows, as mma.sync.m16n8k16
// with the weights as A and the activations as B (rows >= M are zero); its 4 (or 8) warps take
// contiguous runs of the tile's 64-input chunks and add their partial sums through shared memory.
// Or two tiles (quant_tile_plan.h): all parts of a projection in one launch, each warp decoding
// the same chunks of both with the same activations, and a SwiGLU or RoPE/KV epilogue
// (gemv_epilogue.h) on row pairs that the two tiles hold.
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

#include "engine/backend/cuda/gemv_epilogue.cuh"
#include "engine/backend/cuda/int4_tiles.h"
#include "engine/backend/cuda/mma.cuh"
#include "engine/backend/cuda/quant_decode.cuh"
#include "engine/backend/cuda/quant_tile_plan.h"

namespace lathe::cuda::quant {

constexpr int kTileStages = 8;  // chunks of codes in flight per lane (8 measured faster than 16)

// Mma<T> (mma.cuh) plus the exact decode of a pair of 4-bit codes: ORed under the exponent of
// kMagicValue, minus (magic + zero point) by sub(); mul() scales a pair (the GEMM kernel's).
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
  static __device__ __forceinline__ uint32_t mul(uint32_t a, uint32_t b) {
    const __nv_bfloat162 r = __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&a),
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
  static __device__ __forceinline__ uint32_t mul(uint32_t a, uint32_t b) {
    const __half2 r =
        __hmul2(*reinterpret_cast<const __half2*>(&a), *reinterpret_cast<const __half2*>(&b));
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

// Dynamic shared memory: per warp a ring of S chunks of codes (512 bytes per tile each), then the
// groups' TileGroupRow for each of the block's P tiles' 16 rows.
inline size_t tile_smem_bytes(int warps, int tiles, int64_t groups) {
  return static_cast<size_t>(warps) * kTileStages * tiles * 32 * sizeof(uint4) +
         static_cast<size_t>(tiles) * static_cast<size_t>(groups) * kInt4TileRows *
             sizeof(TileGroupRow);
}
constexpr size_t kTileMaxSmem = 200 * 1024;  // parts needing more take the other kernels

// One launch: the parts, how blocks map to their tiles (quant_tile_plan.h), and the output.
struct TileLaunch {
  QuantPart parts[kTileMaxParts];
  TilePlan plan;
  GemvOutput output = GemvOutput::kStore;  // kStore, kResidualAdd, kSwiglu or kRopeKv
  PairOut out;  // y (kStore: row stride ldy; kResidualAdd: the f32 residual) and the epilogues'
  int64_t ldy = 0;
  bool out_f32 = false;
  TileNormInput norm;  // the kernel's NORM variant: x = rms_norm(residual) * weight
};

// Shared memory of the NORM variant's normalized activations: m rows of k.
template <typename T>
size_t tile_norm_bytes(int64_t m, int64_t k) {
  return static_cast<size_t>(m * k) * sizeof(T);
}

// The NORM variant's prologue: x[r, :] = (h * inv_rms) * weight rounded to T for r < m, with h the
// residual row and the sum of squares in double in a fixed order (add_rms_norm's formula), into
// shared memory at row stride ldx. `scratch`: [W][8] doubles. k % 4 == 0, ldx % 4 == 0.
template <typename T, int W>
__device__ __forceinline__ void tile_norm_x(const TileNormInput& n, int m, int64_t k, T* xs,
                                            int64_t ldx, double (*scratch)[8], float* inv_rms) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t groups = k / 4;
  for (int r = 0; r < m; ++r) {
    const float4* row = reinterpret_cast<const float4*>(n.residual + r * k);
    double ss = 0.0;
    for (int64_t g = threadIdx.x; g < groups; g += W * 32) ss += sum_sq4(row[g]);
    ss = warp_sum(ss);
    if (lane == 0) scratch[warp][r] = ss;
  }
  __syncthreads();
  if (threadIdx.x < m) {
    double t = 0.0;
#pragma unroll
    for (int w = 0; w < W; ++w) t += scratch[w][threadIdx.x];
    inv_rms[threadIdx.x] =
        static_cast<float>(1.0 / sqrt(t / static_cast<double>(k) + static_cast<double>(n.eps)));
  }
  __syncthreads();
  const float4* nw = reinterpret_cast<const float4*>(n.weight);
  for (int64_t g = threadIdx.x; g < groups; g += W * 32) {
    const float4 w = nw[g];
    for (int r = 0; r < m; ++r) {
      const float4 h = reinterpret_cast<const float4*>(n.residual + r * k)[g];
      const float inv = inv_rms[r];
      store4(xs + r * ldx + 4 * g, make_float4((h.x * inv) * w.x, (h.y * inv) * w.y,
                                               (h.z * inv) * w.z, (h.w * inv) * w.w));
    }
  }
}

// The part and tile index of the block's P tiles (P = plan.tiles_per_task()).
template <int P>
__device__ __forceinline__ void block_tiles(const TileLaunch& L, int b, int (&part)[P],
                                            int (&tile)[P]) {
  int i = 0;
  while (i + 1 < L.plan.nparts && b >= L.plan.first_task[i + 1]) ++i;
  const int j = b - L.plan.first_task[i];
  part[0] = i;
  if constexpr (P == 1) {
    tile[0] = j;
  } else {
    part[1] = i;
    switch (L.plan.pairing[i]) {
      case TilePairing::kHeadHalves: {
        const int h = L.plan.tiles_per_head, half = h / 2;
        tile[0] = (j / half) * h + j % half;
        tile[1] = tile[0] + half;
        break;
      }
      case TilePairing::kAcrossParts:
        tile[0] = tile[1] = j;
        part[1] = i + 1;
        break;
      default:  // kAdjacent
        tile[0] = 2 * j;
        tile[1] = 2 * j + 1;
        break;
    }
  }
}

// The epilogue over the block's sums (sum[q * 16 + r][mi]: tile q's row r, activation row mi).
template <typename T, int P, int MT>
__device__ __forceinline__ void tile_epilogue(const TileLaunch& L, const int (&part)[P],
                                              const int (&tile)[P], const float* sum, int m) {
  const int nthreads = blockDim.x;
  auto row_of = [&](int q, int r) {
    return static_cast<int>(L.parts[part[q]].row_offset) + tile[q] * kInt4TileRows + r;
  };
  if (L.output == GemvOutput::kStore || L.output == GemvOutput::kResidualAdd) {
    for (int i = threadIdx.x; i < P * kInt4TileRows * MT; i += nthreads) {
      const int row = i / MT, mi = i % MT;
      if (mi >= m) continue;
      const int64_t out = mi * L.ldy + row_of(row / kInt4TileRows, row % kInt4TileRows);
      if (L.output == GemvOutput::kResidualAdd)  // what add_rms_norm adds: the rounded product
        static_cast<float*>(L.out.y)[out] += to_float(from_float<T>(sum[row * MT + mi]));
      else if (L.out_f32)
        static_cast<float*>(L.out.y)[out] = sum[row * MT + mi];
      else
        static_cast<T*>(L.out.y)[out] = from_float<T>(sum[row * MT + mi]);
    }
    return;
  }
  if constexpr (P == 2) {
    const TilePairing pairing = L.plan.pairing[part[0]];
    if (pairing != TilePairing::kAdjacent) {
      // Row r of tile 0 with row r of tile 1: a SwiGLU or a NeoX rotation pair.
      for (int i = threadIdx.x; i < kInt4TileRows * MT; i += nthreads) {
        const int r = i / MT, mi = i % MT;
        if (mi >= m) continue;
        const float a = sum[r * MT + mi], b = sum[(kInt4TileRows + r) * MT + mi];
        if (L.output == GemvOutput::kSwiglu)
          swiglu_epilogue<T>(L.out, mi, row_of(0, r), a, b);
        else
          rope_kv_epilogue<T>(L.out, mi, row_of(0, r), row_of(1, r), a, b);
      }
      return;
    }
    // kRopeKv on adjacent rows (2i, 2i + 1) of each tile: interleaved pairs and v rows.
    for (int i = threadIdx.x; i < P * (kInt4TileRows / 2) * MT; i += nthreads) {
      const int pr = i / MT, mi = i % MT;
      if (mi >= m) continue;
      const int q = pr / (kInt4TileRows / 2), r = 2 * (pr % (kInt4TileRows / 2));
      rope_kv_epilogue<T>(L.out, mi, row_of(q, r), row_of(q, r + 1),
                          sum[(q * kInt4TileRows + r) * MT + mi],
                          sum[(q * kInt4TileRows + r + 1) * MT + mi]);
    }
  }
}

// W: warps per block, each a contiguous run of the tiles' chunks (QuantPart::int4_tile_warps).
// NT: groups of 8 activation rows (M <= 8 NT; groups past M are skipped): NT = 1 keeps the
// activations of the next chunks in a register ring; NT > 1 (batches up to kTileMaxM) loads each
// group's fragments when it is used and reuses the decoded weights for every group.
// P: tiles per block (TilePlan::tiles_per_task); each warp decodes the same chunks of both and
// reuses the activations.
// Codes: kTileStages chunks in flight per lane and tile, cp.async copies into the warp's ring in
// shared memory, one commit group per chunk (the hardware tracks the groups, so all stay in
// flight). The warps' partial sums go to their own rings (free after the loop) and are added in
// warp order (the result does not depend on timing).
template <typename T, int W, int NT, int P, bool NORM>
__global__ void __launch_bounds__(W * 32)
    quant_gemv_tiles_kernel(const __grid_constant__ TileLaunch L, const T* x, int m) {
  using Op = TileMma<T>;
  constexpr int S = kTileStages, XD = kTileXAhead + 1, MT = 8 * NT;
  static_assert(S % XD == 0, "the activation ring's index must be static in the unrolled loop");
  static_assert(P * kInt4TileRows * MT * sizeof(float) <= S * P * 32 * sizeof(uint4),
                "a warp's partial sums must fit in its ring");
  extern __shared__ uint4 tile_smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  int part[P], tile[P];
  block_tiles<P>(L, blockIdx.x, part, tile);
  const QuantPart& p0 = L.parts[part[0]];
  const int64_t k = p0.k;
  uint4* ring = tile_smem + warp * S * P * 32 + lane;  // stage u, tile q at ring[(u P + q) * 32]
  TileGroupRow* groups_smem = reinterpret_cast<TileGroupRow*>(tile_smem + W * S * P * 32);
  const int chunks = static_cast<int>(k / kInt4TileK);
  const int c0 = chunks * warp / W, c1 = chunks * (warp + 1) / W;
  const int groups = static_cast<int>(k / p0.group_size);
  const int per_group = p0.group_size / static_cast<int>(kInt4TileK);
  const int ngroups = (m + 7) / 8;  // activation groups in use (<= NT)

  // Codes of the first S chunks, before anything else (and before the PDL wait).
  const uint4* code_at[P];
#pragma unroll
  for (int q = 0; q < P; ++q)
    code_at[q] = static_cast<const uint4*>(L.parts[part[q]].data) +
                 (static_cast<int64_t>(tile[q]) * chunks + c0) * 32 + lane;
#pragma unroll
  for (int u = 0; u < S; ++u) {
#pragma unroll
    for (int q = 0; q < P; ++q)
      if (c0 + u < c1) cp_async16(ring + (u * P + q) * 32, code_at[q] + u * 32, 16);
    cp_async_commit();
  }
#pragma unroll
  for (int q = 0; q < P; ++q) code_at[q] += S * 32;

  // Scales and zero points of the tiles' rows into shared memory (entry (q groups + grp) 16 + r),
  // read in the stored row order (consecutive threads, consecutive groups of a row: coalesced) in
  // batches whose loads are all issued before the first is used (one memory latency per batch,
  // not one per entry: run 41's profile).
  {
    constexpr int kBatch = 8;
    const int per_tile = groups * kInt4TileRows, total = P * per_tile;
    for (int base = threadIdx.x; base < total; base += kBatch * W * 32) {
      float sc[kBatch], zf[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int i = base + u * W * 32;
        sc[u] = 0.0f;
        zf[u] = 8.0f;
        if (i < total) {
          const int q = i / per_tile, rem = i % per_tile;
          const QuantPart& pq = L.parts[part[q]];
          const int64_t at =
              static_cast<int64_t>(tile[q]) * per_tile + rem;  // row-major [n, groups]
          sc[u] = pq.scale_dtype == DType::kF32
                      ? static_cast<const float*>(pq.scales)[at]
                      : __half2float(static_cast<const __half*>(pq.scales)[at]);
          if (pq.zeros != nullptr) zf[u] = static_cast<float>(pq.zeros[at]);
        }
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int i = base + u * W * 32;
        if (i >= total) break;
        const int q = i / per_tile, rem = i % per_tile;
        const int r = rem / groups, grp = rem % groups;
        TileGroupRow v;
        v.scale = sc[u];
        v.zero_pair = Op::pack(Op::kMagicValue + zf[u], Op::kMagicValue + zf[u]);
        groups_smem[(q * groups + grp) * kInt4TileRows + r] = v;
      }
    }
  }
  pdl_wait();
  pdl_trigger();
  if constexpr (NORM) {
    // The normalized activations into shared memory after the groups; x reads them from there.
    __shared__ double norm_scratch[W][8];
    __shared__ float inv_rms[8];
    T* xs = reinterpret_cast<T*>(reinterpret_cast<uint8_t*>(groups_smem) +
                                 P * groups * kInt4TileRows * sizeof(TileGroupRow));
    tile_norm_x<T, W>(L.norm, m, k, xs, k, norm_scratch, inv_rms);
    __syncthreads();
    x = xs;
  }

  // Activations of row 8 nt + g (rows >= m read row 0 and are zeroed: no divergent loads).
  auto x_row = [&](int nt) {
    const int row = 8 * nt + g;
    return x + static_cast<int64_t>(row < m ? row : 0) * k + 16 * t;
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
  float acc[P][NT][4];  // per tile and group: rows g, g (B cols 2t, 2t+1), g + 8, g + 8
#pragma unroll
  for (int q = 0; q < P; ++q)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
      acc[q][nt][0] = acc[q][nt][1] = acc[q][nt][2] = acc[q][nt][3] = 0.0f;
  for (int c = c0; c < c1; c += S) {
#pragma unroll
    for (int u = 0; u < S; ++u) {
      const int cc = c + u;
      if (cc >= c1) break;
      cp_async_wait<S - 1>();  // chunk cc's group (the oldest) has landed
      uint4 cur[P];
#pragma unroll
      for (int q = 0; q < P; ++q) {
        cur[q] = ring[(u * P + q) * 32];
        if (cc + S < c1) cp_async16(ring + (u * P + q) * 32, code_at[q], 16);
        code_at[q] += 32;
      }
      cp_async_commit();
      TileGroupRow lo[P], hi[P];
#pragma unroll
      for (int q = 0; q < P; ++q) {
        lo[q] = groups_smem[(q * groups + grp) * kInt4TileRows + g];
        hi[q] = groups_smem[(q * groups + grp) * kInt4TileRows + g + 8];
      }
      if (++in_group == per_group) {
        in_group = 0;
        ++grp;
      }
      uint32_t a[P][4][4];  // [tile][k16 step][register]
#pragma unroll
      for (int q = 0; q < P; ++q) {
        const uint32_t cw[4] = {cur[q].x, cur[q].y, cur[q].z, cur[q].w};
#pragma unroll
        for (int kb = 0; kb < 4; ++kb)
#pragma unroll
          for (int j = 0; j < 4; ++j)
            a[q][kb][j] = Op::sub(((cw[kb] >> (4 * j)) & 0x000F000Fu) | Op::kMagic,
                                  (j & 1) ? hi[q].zero_pair : lo[q].zero_pair);
      }
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
#pragma unroll
        for (int q = 0; q < P; ++q) {
          float part_sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
          for (int kb = 0; kb < 4; ++kb) Op::run(part_sum, a[q][kb], xw[2 * kb], xw[2 * kb + 1]);
          acc[q][nt][0] = fmaf(lo[q].scale, part_sum[0], acc[q][nt][0]);
          acc[q][nt][1] = fmaf(lo[q].scale, part_sum[1], acc[q][nt][1]);
          acc[q][nt][2] = fmaf(hi[q].scale, part_sum[2], acc[q][nt][2]);
          acc[q][nt][3] = fmaf(hi[q].scale, part_sum[3], acc[q][nt][3]);
        }
      }
    }
  }
  cp_async_wait<0>();
  __syncwarp();
  // Warp w's partial sums, [tile row][activation row], in its ring.
  auto red = [&](int w) { return reinterpret_cast<float*>(tile_smem + w * S * P * 32); };
  float* mine = red(warp);
#pragma unroll
  for (int q = 0; q < P; ++q)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      if (nt >= ngroups) break;
      const int r = q * kInt4TileRows + g, c = 8 * nt + 2 * t;
      mine[r * MT + c] = acc[q][nt][0];
      mine[r * MT + c + 1] = acc[q][nt][1];
      mine[(r + 8) * MT + c] = acc[q][nt][2];
      mine[(r + 8) * MT + c + 1] = acc[q][nt][3];
    }
  __syncthreads();
  // Warp 0's slots take the sums over the warps, in warp order.
  for (int i = threadIdx.x; i < P * kInt4TileRows * MT; i += W * 32) {
    if (i % MT >= m) continue;
    float v = red(0)[i];
#pragma unroll
    for (int w = 1; w < W; ++w) v += red(w)[i];
    red(0)[i] = v;
  }
  __syncthreads();
  tile_epilogue<T, P, MT>(L, part, tile, red(0), m);
}

// Whether the tile kernel takes part p (else the one-row kernel reads its codes).
inline bool tiles_kernel_takes(const QuantPart& p) {
  return p.int4_tiles && tile_smem_bytes(8, 1, p.k / p.group_size) <= kTileMaxSmem;
}

template <typename T, int W, int NT, int P, bool NORM = false>
cudaError_t launch_tiles(const TileLaunch& L, const T* x, int64_t m, cudaStream_t stream) {
  const size_t smem = tile_smem_bytes(W, P, L.parts[0].k / L.parts[0].group_size) +
                      (NORM ? tile_norm_bytes<T>(m, L.parts[0].k) : 0);
  // Above 48 KB of dynamic shared memory a kernel needs the opt-in.
  if (smem > 48 * 1024) {
    const cudaError_t e = cudaFuncSetAttribute(quant_gemv_tiles_kernel<T, W, NT, P, NORM>,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(kTileMaxSmem));
    if (e != cudaSuccess) return e;
  }
  return launch_kernel(quant_gemv_tiles_kernel<T, W, NT, P, NORM>,
                       dim3(static_cast<unsigned>(L.plan.tasks())), dim3(W * 32), smem, stream, L,
                       x, static_cast<int>(m));
}

// m <= kTileMaxM activation rows: one part, one tile per block, stored.
// kResidualAdd (m <= 8): y is the f32 residual [m, ldy], the rounded product added to it.
inline cudaError_t launch_gemv_tiles(const QuantPart& p, DType act, const void* x, DType out_dtype,
                                     void* y, int64_t ldy, int64_t m, cudaStream_t stream,
                                     GemvOutput output = GemvOutput::kStore) {
  TileLaunch L;
  L.parts[0] = p;
  L.plan = single_tile_plan(p);
  L.output = output;
  L.out.y = y;
  L.ldy = ldy;
  L.out_f32 = out_dtype == DType::kF32;
  cudaError_t err = cudaSuccess;
  LATHE_DISPATCH_ACT(act, T, {
    const T* xt = static_cast<const T*>(x);
    if (m > 8)
      err = launch_tiles<T, 8, kTileMaxM / 8, 1>(L, xt, m, stream);
    else if (p.int4_tile_warps == 4)
      err = launch_tiles<T, 4, 1, 1>(L, xt, m, stream);
    else
      err = launch_tiles<T, 8, 1, 1>(L, xt, m, stream);
  });
  return err;
}

// m <= 8 activation rows: the parts of a projection planned two tiles per block (plan), with the
// plan's output (PairOut filled by the caller); with L.norm.residual, x is the RMSNorm of the
// residual, built by the kernel (x unused).
inline cudaError_t launch_gemv_tile_pairs(const TileLaunch& L, DType act, const void* x, int64_t m,
                                          cudaStream_t stream) {
  cudaError_t err = cudaSuccess;
  LATHE_DISPATCH_ACT(act, T, {
    if (L.norm.residual != nullptr)
      err = launch_tiles<T, 8, 1, 2, true>(L, static_cast<const T*>(x), m, stream);
    else
      err = launch_tiles<T, 8, 1, 2>(L, static_cast<const T*>(x), m, stream);
  });
  return err;
}

}  // namespace lathe::cuda::quant
