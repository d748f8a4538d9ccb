// W4A16 products at batches above the decode kernels' (quant_gemm_int4, quant_linear.h): 4-bit
// integer parts in the tile layout (int4_tiles.h) times M activation rows on tensor cores, the
// weights decoded in registers and never written out. Included by quant_gemm_int4.cu only.
//
// A block computes kGemmBlockTiles 16-row tiles of the part (128 output rows) for BM = 8 NB
// activation rows, over a run of the part's 64-input chunks (its split of k). Each of its 4 warps
// owns 2 tiles and all BM rows: per chunk it decodes its tiles' A fragments once
// (quant_gemv_tiles's exact three-instruction decode) and reuses them for the NB groups of 8 rows,
// whose B fragments it reads from shared memory (so each activation value read from shared memory
// feeds two tiles). Codes and activations of kGemmStages chunks are in flight, copied by cp.async
// into a ring of stages shared by the block; the activation rows are padded to 144 bytes so that
// the fragment loads (lane 4g + t: 32 bytes of row g at 32 t) hit 32 distinct banks per quarter
// warp. Scales and zero points are read per scale group from global memory one group ahead.
// Numerics: each weight is (code - zero) * scale rounded to the activation type (as the
// dequantize-then-GEMM path rounds it), the products accumulated in f32 by the tensor cores.
// Splits of k (few output blocks): each split stores its f32 sums to partial[split][m][n] and a
// second kernel adds them in split order (the result does not depend on timing).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "engine/backend/cuda/quant_gemv_tiles.cuh"

namespace lathe::cuda::quant {

constexpr int kGemmWarps = 4;
constexpr int kGemmWarpTiles = 2;
constexpr int kGemmBlockTiles = kGemmWarps * kGemmWarpTiles;
constexpr int kGemmStages = 4;
constexpr int kGemmXStride = static_cast<int>(kInt4TileK) * 2 + 16;  // bytes per staged row

// Bytes of one stage: the block's tiles' codes of a chunk, then BM padded activation rows.
__host__ __device__ constexpr int gemm_stage_bytes(int nb) {
  return kGemmBlockTiles * 32 * 16 + 8 * nb * kGemmXStride;
}

struct GemmTilesLaunch {
  QuantPart p;
  void* y = nullptr;  // [m, ldy] of T or f32, the part's columns from p.row_offset
  int64_t ldy = 0;
  bool out_f32 = false;
  float* partial = nullptr;  // splits > 1: [splits][m][p.n] f32
  int m = 0;
  int mblocks = 0, nblocks = 0, splits = 1, chunks_per_split = 0;
};

template <typename T, int NB>
__global__ void __launch_bounds__(kGemmWarps * 32, 3)
    quant_gemm_tiles_kernel(const __grid_constant__ GemmTilesLaunch L, const T* x) {
  using Op = TileMma<T>;
  constexpr int BM = 8 * NB, WT = kGemmWarpTiles, S = kGemmStages;
  constexpr int kStage = gemm_stage_bytes(NB), kThreads = kGemmWarps * 32;
  extern __shared__ uint4 gemm_smem[];
  uint8_t* smem = reinterpret_cast<uint8_t*>(gemm_smem);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  // Blocks of the same output tiles and split are adjacent: their weights are read once from HBM.
  const int mb = blockIdx.x % L.mblocks, rest = blockIdx.x / L.mblocks;
  const int nb = rest % L.nblocks, split = rest / L.nblocks;
  const QuantPart& p = L.p;
  const int64_t k = p.k;
  const int chunks = static_cast<int>(k / kInt4TileK), tiles = static_cast<int>(p.n / 16);
  const int c0 = split * L.chunks_per_split;
  const int nchunks = min(chunks, c0 + L.chunks_per_split) - c0;
  const int tile0 = nb * kGemmBlockTiles, row0 = mb * BM;
  const int my_tile = tile0 + warp * WT;  // this warp's first tile
  const uint4* codes = static_cast<const uint4*>(p.data);

  auto codes_at = [&](int s) { return reinterpret_cast<uint4*>(smem + s * kStage); };
  auto x_at = [&](int s) { return smem + s * kStage + kGemmBlockTiles * 32 * 16; };
  // This thread's copies of a stage, addressed once: chunk c0 + j is j chunks further on.
  constexpr int kCodeCopies = kGemmBlockTiles * 32 / kThreads, kXCopies = BM * 8 / kThreads;
  const uint4* code_src[kCodeCopies];
  bool code_has[kCodeCopies];
#pragma unroll
  for (int u = 0; u < kCodeCopies; ++u) {
    const int i = threadIdx.x + u * kThreads, tile = tile0 + i / 32;
    code_has[u] = tile < tiles;
    code_src[u] =
        codes + (static_cast<int64_t>(code_has[u] ? tile : 0) * chunks + c0) * 32 + i % 32;
  }
  const T* x_src[kXCopies];
  int x_bytes[kXCopies];
#pragma unroll
  for (int u = 0; u < kXCopies; ++u) {
    const int i = threadIdx.x + u * kThreads, row = row0 + i / 8;
    const bool has = row < L.m;  // rows past m read row 0's address and write zeros
    x_bytes[u] = has ? 16 : 0;
    x_src[u] = x + static_cast<int64_t>(has ? row : 0) * k + c0 * kInt4TileK + (i % 8) * 8;
  }
  auto load_codes = [&](int s, int j) {
#pragma unroll
    for (int u = 0; u < kCodeCopies; ++u)
      if (code_has[u])
        cp_async16(codes_at(s) + threadIdx.x + u * kThreads, code_src[u] + j * 32, 16);
  };
  auto load_x = [&](int s, int j) {
#pragma unroll
    for (int u = 0; u < kXCopies; ++u) {
      const int i = threadIdx.x + u * kThreads;
      cp_async16(x_at(s) + (i / 8) * kGemmXStride + (i % 8) * 16, x_src[u] + j * kInt4TileK,
                 x_bytes[u]);
    }
  };

  // Weights first (never written by the forward pass), then the wait on the previous kernel.
  for (int s = 0; s < S - 1; ++s)
    if (s < nchunks) load_codes(s, s);
  pdl_wait();
  pdl_trigger();
  for (int s = 0; s < S - 1; ++s) {
    if (s < nchunks) load_x(s, s);
    cp_async_commit();
  }

  // The scale group's values of this warp's rows (tile q, row g + 8 h), the next group's ahead.
  const int groups = static_cast<int>(k / p.group_size);
  const int per_group = p.group_size / static_cast<int>(kInt4TileK);
  auto fetch = [&](int grp, float(&sc)[WT][2], float(&zf)[WT][2]) {
#pragma unroll
    for (int q = 0; q < WT; ++q)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        sc[q][h] = 0.0f;
        zf[q][h] = 8.0f;
        if (my_tile + q < tiles && grp < groups) {
          const int64_t at =
              (static_cast<int64_t>(my_tile + q) * 16 + g + 8 * h) * groups + grp;  // [n, groups]
          sc[q][h] = p.scale_dtype == DType::kF32
                         ? static_cast<const float*>(p.scales)[at]
                         : __half2float(static_cast<const __half*>(p.scales)[at]);
          if (p.zeros != nullptr) zf[q][h] = static_cast<float>(p.zeros[at]);
        }
      }
  };
  int grp = c0 / per_group, in_group = c0 - grp * per_group;
  float sc[WT][2], zf[WT][2], next_sc[WT][2], next_zf[WT][2];
  fetch(grp, sc, zf);
  fetch(grp + 1, next_sc, next_zf);
  uint32_t zp[WT][2], sp[WT][2];  // (magic + zero) and the scale, packed in both halves
  auto pack_group = [&](const float(&s_)[WT][2], const float(&z_)[WT][2]) {
#pragma unroll
    for (int q = 0; q < WT; ++q)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        zp[q][h] = Op::pack(Op::kMagicValue + z_[q][h], Op::kMagicValue + z_[q][h]);
        sp[q][h] = Op::pack(s_[q][h], s_[q][h]);
      }
  };
  pack_group(sc, zf);

  static_assert(NB % 4 == 0, "groups of 8 rows are taken four at a time");
  const int live_groups = min(NB, (L.m - row0 + 7) / 8);  // groups of 8 rows holding rows < m
  float acc[WT][NB][4];
#pragma unroll
  for (int q = 0; q < WT; ++q)
#pragma unroll
    for (int j = 0; j < NB; ++j) acc[q][j][0] = acc[q][j][1] = acc[q][j][2] = acc[q][j][3] = 0.0f;

  for (int i = 0; i < nchunks; ++i) {
    cp_async_wait<S - 2>();  // chunk i's stage has landed (this thread's copies)
    __syncthreads();         // ... and every thread's; stage (i - 1) % S is free again
    {
      const int j = i + S - 1;
      if (j < nchunks) {
        load_codes(j % S, j);
        load_x(j % S, j);
      }
      cp_async_commit();
    }
    const int s = i % S;
    if (my_tile < tiles) {
      uint32_t a[WT][4][4];  // [tile][k16 step][register]
#pragma unroll
      for (int q = 0; q < WT; ++q) {
        const uint4 cur = codes_at(s)[(warp * WT + q) * 32 + lane];
        const uint32_t cw[4] = {cur.x, cur.y, cur.z, cur.w};
#pragma unroll
        for (int kb = 0; kb < 4; ++kb)
#pragma unroll
          for (int r = 0; r < 4; ++r)
            a[q][kb][r] =
                Op::mul(Op::sub(((cw[kb] >> (4 * r)) & 0x000F000Fu) | Op::kMagic, zp[q][r & 1]),
                        sp[q][r & 1]);
      }
      // Four groups of 8 rows at a time: 4 x WT independent accumulators between two products
      // into the same one (the tensor pipe's latency is hidden within the warp).
#pragma unroll
      for (int j0 = 0; j0 < NB; j0 += 4) {
        if (j0 >= live_groups) break;
        uint32_t xw[4][8];
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) {
          const uint8_t* xr = x_at(s) + (8 * (j0 + jj) + g) * kGemmXStride + 32 * t;
          const uint4 xa = *reinterpret_cast<const uint4*>(xr);
          const uint4 xb = *reinterpret_cast<const uint4*>(xr + 16);
          xw[jj][0] = xa.x, xw[jj][1] = xa.y, xw[jj][2] = xa.z, xw[jj][3] = xa.w;
          xw[jj][4] = xb.x, xw[jj][5] = xb.y, xw[jj][6] = xb.z, xw[jj][7] = xb.w;
        }
#pragma unroll
        for (int kb = 0; kb < 4; ++kb)
#pragma unroll
          for (int jj = 0; jj < 4; ++jj)
#pragma unroll
            for (int q = 0; q < WT; ++q)
              Op::run(acc[q][j0 + jj], a[q][kb], xw[jj][2 * kb], xw[jj][2 * kb + 1]);
      }
    }
    if (++in_group == per_group) {
      in_group = 0;
      ++grp;
      pack_group(next_sc, next_zf);
      if (i + 1 < nchunks) fetch(grp + 1, next_sc, next_zf);
    }
  }
  cp_async_wait<0>();

  // acc[q][j]: rows g (0, 1) and g + 8 (2, 3) of tile q; activation rows 8 j + 2 t (0, 2) and
  // 8 j + 2 t + 1 (1, 3).
  if (my_tile >= tiles) return;
#pragma unroll
  for (int q = 0; q < WT; ++q) {
    if (my_tile + q >= tiles) break;
#pragma unroll
    for (int j = 0; j < NB; ++j) {
      if (j >= live_groups) break;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = row0 + 8 * j + 2 * t + (e & 1);
        const int feat = (my_tile + q) * 16 + g + 8 * (e >> 1);
        if (row >= L.m) continue;
        const float v = acc[q][j][e];
        if (L.splits > 1) {
          L.partial[(static_cast<int64_t>(split) * L.m + row) * p.n + feat] = v;
        } else {
          const int64_t at = row * L.ldy + p.row_offset + feat;
          if (L.out_f32)
            static_cast<float*>(L.y)[at] = v;
          else
            static_cast<T*>(L.y)[at] = from_float<T>(v);
        }
      }
    }
  }
}

// y[row, row_offset + f] = sum over splits, in split order, of partial[split][row][f].
template <typename T>
__global__ void quant_gemm_splits_kernel(const __grid_constant__ GemmTilesLaunch L) {
  pdl_wait();
  pdl_trigger();
  const int64_t n = L.p.n, total = static_cast<int64_t>(L.m) * n;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float v = L.partial[i];
    for (int s = 1; s < L.splits; ++s) v += L.partial[s * total + i];
    const int64_t row = i / n, at = row * L.ldy + L.p.row_offset + i % n;
    if (L.out_f32)
      static_cast<float*>(L.y)[at] = v;
    else
      static_cast<T*>(L.y)[at] = from_float<T>(v);
  }
}

}  // namespace lathe::cuda::quant
