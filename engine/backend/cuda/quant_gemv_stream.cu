// The streaming W4A16 decode kernel (quant_gemv_stream.cuh has the design).
#include <algorithm>
#include <atomic>

#include "engine/backend/cuda/bulk_copy.cuh"
#include "engine/backend/cuda/quant_gemv_stream.cuh"
#include "engine/backend/cuda/quant_gemv_stream_policy.h"

namespace lathe::cuda::quant {
namespace {

constexpr int kStreamWarps = 8;      // the tile kernel's k split (int4_tile_warps' default)
constexpr int kStreamChunks = 4;     // chunks per warp and stage (one bulk copy per tile)
constexpr int kStreamPair = 2;       // chunks computed side by side
constexpr int kStreamTiles = 2;      // tiles per task
constexpr int kStreamMaxStages = 8;  // CudaSwitches::int4_stream_stages' upper bound
constexpr int kChunkBytes = 512;     // one tile's 16 rows x 64 inputs of 4-bit codes
constexpr int kRedRows = kStreamTiles * kInt4TileRows;
constexpr int kRedCols = 8;  // activation rows of a partial sum (the tile kernel's MT at NT = 1)

// The launch's shape and its dynamic shared memory: each warp's ring, the barriers, two slots of
// the tasks' scales and zero points, two sets of the warps' partial sums, the staged activations.
struct StreamArgs {
  TileLaunch L;
  int32_t stages = 0;  // ring stages per warp (<= spt)
  int32_t spt = 0;     // stages per task: the longest warp's chunks / kStreamChunks, rounded up
  int32_t ldx = 0;     // row stride of the staged activations (elements; k + 8)
  int32_t scale_bytes = 2;  // 2 (f16) or 4 (f32)
  int32_t meta_tile = 0;    // bytes of one tile's scales and zero points in a slot
  int32_t meta_zeros = 0;   // offset of the zero points in them (0: symmetric, zero point 8)
  uint32_t off_bars = 0, off_meta = 0, off_red = 0, off_x = 0, smem = 0;
};

constexpr uint32_t align16(uint64_t v) {
  return static_cast<uint32_t>((v + 15) / 16 * 16);
}

// The layout with `stages` ring stages per warp. The staged activations are bf16 or f16: 2 bytes
// each.
StreamArgs stream_layout(const QuantPart& p, int64_t m, int32_t stages) {
  StreamArgs A;
  const int64_t chunks = p.k / kInt4TileK;
  const int64_t per_warp = (chunks + kStreamWarps - 1) / kStreamWarps;
  A.spt = static_cast<int32_t>((per_warp + kStreamChunks - 1) / kStreamChunks);
  A.stages = std::max(1, std::min(stages, A.spt));
  A.ldx = static_cast<int32_t>(p.k + 8);
  A.scale_bytes = p.scale_dtype == DType::kF32 ? 4 : 2;
  const int64_t groups = p.k / p.group_size;
  A.meta_tile = static_cast<int32_t>(kInt4TileRows * groups * A.scale_bytes);
  if (p.zeros != nullptr) {
    A.meta_zeros = A.meta_tile;
    A.meta_tile += static_cast<int32_t>(kInt4TileRows * groups);
  }
  const uint64_t ring =
      static_cast<uint64_t>(kStreamWarps) * A.stages * kStreamTiles * kStreamChunks * kChunkBytes;
  A.off_bars = align16(ring);
  A.off_meta = align16(A.off_bars + (kStreamWarps * kStreamMaxStages + 2) * sizeof(uint64_t));
  A.off_red = align16(A.off_meta + 2ull * kStreamTiles * static_cast<uint64_t>(A.meta_tile));
  A.off_x = align16(A.off_red + 2ull * kStreamWarps * kRedRows * kRedCols * sizeof(float));
  A.smem = align16(A.off_x + static_cast<uint64_t>(m) * A.ldx * 2);
  return A;
}

// The part's int4_stream_blocks, clamped to the 1..4 blocks per multiprocessor the kernel is built
// for.
int stream_blocks_per_sm(const QuantPart& p) {
  return std::max(1, std::min(4, static_cast<int>(p.int4_stream_blocks)));
}

// The layout with the part's int4_stream_stages, or fewer where the blocks a multiprocessor gets
// would not fit its shared memory (budget; 1 KB of it reserved per block). A multiprocessor gets
// int4_stream_blocks blocks, or fewer where the product has fewer tasks than that many per
// multiprocessor (`tasks`, 0 when unknown: then one, the check of stream_kernel_takes), or fewer
// where even one stage would not let them fit (then the deepest ring with which fewer do). A second
// block per multiprocessor is worth more than ring depth where it has work (70B, run 86: 53.1 tok/s
// against 43.9), and where it has none the shallower ring only costs (8B down_proj, 128 tasks for
// 132 multiprocessors: 324 tok/s fitted against 358).
StreamArgs stream_args(const QuantPart& p, int64_t m, int64_t budget, int64_t tasks, int sm_count) {
  int64_t blocks = stream_blocks_per_sm(p);
  blocks = std::min(blocks, std::max<int64_t>(1, (tasks + sm_count - 1) / std::max(1, sm_count)));
  const StreamArgs A = stream_layout(p, m, p.int4_stream_stages);
  if (!p.int4_stream_fit) return A;
  for (;; --blocks) {
    StreamArgs F = A;
    while (F.stages > 1 && blocks * (F.smem + 1024) > budget) F = stream_layout(p, m, F.stages - 1);
    if (blocks == 1 || blocks * (F.smem + 1024) <= budget) return F;
  }
}

// A multiprocessor's shared memory: the opt-in limit per block and the 1 KB the system keeps
// (227 + 1 KB on the H100 and H200).
int64_t smem_per_sm(const DeviceLimits& d) {
  return static_cast<int64_t>(d.smem_optin) + 1024;
}

template <typename T, bool NORM>
__global__ void __launch_bounds__(kStreamWarps * 32, 2)
    quant_gemv_stream_kernel(const __grid_constant__ StreamArgs A, const T* x, int m) {
#ifdef LATHE_BULK_COPY_ARCH
  using Op = TileMma<T>;
  constexpr int W = kStreamWarps, J = kStreamChunks, JP = kStreamPair, P = kStreamTiles;
  extern __shared__ __align__(128) uint8_t smem[];
  const TileLaunch& L = A.L;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int NS = A.stages, spt = A.spt;
  const int64_t k = L.parts[0].k;
  const int chunks = static_cast<int>(k / kInt4TileK);
  const int c0 = chunks * warp / W, c1 = chunks * (warp + 1) / W;
  const int groups = static_cast<int>(k / L.parts[0].group_size);
  const int per_group = L.parts[0].group_size / static_cast<int>(kInt4TileK);
  const int tasks = L.plan.first_task[L.plan.nparts];
  const int my_tasks = (tasks - 1 - static_cast<int>(blockIdx.x)) / static_cast<int>(gridDim.x) + 1;
  // Stage s of this warp, tile q, chunk j: ring + ((s P + q) J + j) kChunkBytes.
  uint8_t* ring = smem + static_cast<size_t>(warp) * NS * P * J * kChunkBytes;
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + A.off_bars) + warp * kStreamMaxStages;
  uint64_t* meta_full = reinterpret_cast<uint64_t*>(smem + A.off_bars) + W * kStreamMaxStages;

  if (lane == 0)
    for (int s = 0; s < NS; ++s) mbar_init(full + s, 1);
  if (threadIdx.x == 0) {
    mbar_init(meta_full, 1);
    mbar_init(meta_full + 1, 1);
  }
  mbar_init_fence();
  __syncthreads();

  // Task ti's scales and zero points into slot ti & 1 (thread 0, with the task's first stage).
  auto issue_meta = [&](int ti, const int(&part)[P], const int(&tile)[P]) {
    uint64_t* bar = meta_full + (ti & 1);
    uint8_t* dst = smem + A.off_meta + (ti & 1) * P * A.meta_tile;
    const int64_t scale_tile = kInt4TileRows * groups * A.scale_bytes;
    mbar_arrive_expect_tx(bar, static_cast<uint32_t>(P * A.meta_tile));
#pragma unroll
    for (int q = 0; q < P; ++q) {
      const QuantPart& pq = L.parts[part[q]];
      bulk_copy_to_smem(dst + q * A.meta_tile,
                        static_cast<const uint8_t*>(pq.scales) + tile[q] * scale_tile,
                        static_cast<uint32_t>(scale_tile), bar);
      if (A.meta_zeros != 0)
        bulk_copy_to_smem(dst + q * A.meta_tile + A.meta_zeros,
                          pq.zeros + static_cast<int64_t>(tile[q]) * kInt4TileRows * groups,
                          static_cast<uint32_t>(kInt4TileRows * groups), bar);
    }
  };
  // The warp's next stage (task p_ti, stage p_st of it) into ring slot `slot` (lane 0; the stage
  // counted over the warp's tasks is the slot's index modulo NS). No divisions: the position and
  // the task's tiles are carried from call to call.
  int p_ti = 0, p_st = 0, p_part[P], p_tile[P];
  auto issue_next = [&](int slot) {
    const int ti = p_ti, st = p_st;
    if (++p_st == spt) {
      p_st = 0;
      ++p_ti;
    }
    if (ti >= my_tasks) return;
    if (st == 0) {
      block_tiles<P>(L, static_cast<int>(blockIdx.x) + ti * static_cast<int>(gridDim.x), p_part,
                     p_tile);
      if (warp == 0) issue_meta(ti, p_part, p_tile);
    }
    const int ca = c0 + st * J;
    const int n = max(0, min(J, c1 - ca));
    if (n == 0) {
      mbar_arrive(full + slot);
      return;
    }
    mbar_arrive_expect_tx(full + slot, static_cast<uint32_t>(n * P * kChunkBytes));
#pragma unroll
    for (int q = 0; q < P; ++q)
      bulk_copy_to_smem(ring + (slot * P + q) * J * kChunkBytes,
                        static_cast<const uint8_t*>(L.parts[p_part[q]].data) +
                            (static_cast<int64_t>(p_tile[q]) * chunks + ca) * kChunkBytes,
                        static_cast<uint32_t>(n * kChunkBytes), full + slot);
  };

  // The first stages, before the wait on the previous kernel (weights only).
  if (lane == 0)
    for (int s = 0; s < NS; ++s) issue_next(s);
  pdl_wait();
  T* xs = reinterpret_cast<T*>(smem + A.off_x);
  if constexpr (NORM) {
    __shared__ double norm_scratch[W][8];
    __shared__ float inv_rms[8];
    tile_norm_x<T, W>(L.norm, m, k, xs, A.ldx, norm_scratch, inv_rms);
  } else {
    const int64_t vecs = k / 8;  // 16-byte vectors per row
    for (int r = 0; r < m; ++r) {
      const uint4* src = reinterpret_cast<const uint4*>(x + r * k);
      uint4* dst = reinterpret_cast<uint4*>(xs + static_cast<int64_t>(r) * A.ldx);
      for (int64_t i = threadIdx.x; i < vecs; i += W * 32) dst[i] = src[i];
    }
  }
  pdl_trigger();
  __syncthreads();

  const bool has_x = g < m;
  const T* x_lane = xs + static_cast<int64_t>(has_x ? g : 0) * A.ldx + 16 * t;
  auto red = [&](int ti, int w) {
    return reinterpret_cast<float*>(smem + A.off_red) + ((ti & 1) * W + w) * kRedRows * kRedCols;
  };
  int slot = 0;        // the ring slot of the warp's next stage
  uint32_t phase = 0;  // its use count's parity
  for (int ti = 0; ti < my_tasks; ++ti) {
    int part[P], tile[P];
    block_tiles<P>(L, static_cast<int>(blockIdx.x) + ti * static_cast<int>(gridDim.x), part, tile);
    mbar_wait(meta_full + (ti & 1), (ti >> 1) & 1);
    const uint8_t* meta = smem + A.off_meta + (ti & 1) * P * A.meta_tile;
    // Tile q's row r of group grp, as the tile kernel stages it.
    auto group_row = [&](int q, int r, int grp) {
      const uint8_t* mt = meta + q * A.meta_tile;
      const int at = r * groups + grp;
      TileGroupRow v;
      v.scale = A.scale_bytes == 4 ? reinterpret_cast<const float*>(mt)[at]
                                   : __half2float(reinterpret_cast<const __half*>(mt)[at]);
      const float zf = A.meta_zeros != 0 ? static_cast<float>(mt[A.meta_zeros + at]) : 8.0f;
      v.zero_pair = Op::pack(Op::kMagicValue + zf, Op::kMagicValue + zf);
      return v;
    };
    int grp = c0 / per_group, in_group = c0 - grp * per_group, have_grp = -1;
    TileGroupRow lo[P], hi[P];
    float acc[P][4];
#pragma unroll
    for (int q = 0; q < P; ++q) acc[q][0] = acc[q][1] = acc[q][2] = acc[q][3] = 0.0f;
    for (int st = 0; st < spt; ++st) {
      const int ca = c0 + st * J;
      const int n = max(0, min(J, c1 - ca));
      mbar_wait(full + slot, phase);
      // The stage's n chunks, JP at a time: per k16 step a pair's products are issued side by
      // side (independent mma chains; a missing chunk is zero codes times zero activations), then
      // each chunk's sums are scaled into acc in chunk order (the tile kernel's order, so the same
      // bits).
#pragma unroll
      for (int jp = 0; jp < J; jp += JP) {
        const int np = min(JP, n - jp);  // chunks of this pair (<= 0: none)
        if (np <= 0) break;
        uint4 cur[JP][P];
#pragma unroll
        for (int j = 0; j < JP; ++j)
#pragma unroll
          for (int q = 0; q < P; ++q)
            cur[j][q] = j < np ? reinterpret_cast<const uint4*>(
                                     ring + ((slot * P + q) * J + jp + j) * kChunkBytes)[lane]
                               : make_uint4(0u, 0u, 0u, 0u);
        TileGroupRow clo[JP][P], chi[JP][P];
        uint32_t xw[JP][8];
#pragma unroll
        for (int j = 0; j < JP; ++j) {
          if (j < np) {
            if (grp != have_grp) {
#pragma unroll
              for (int q = 0; q < P; ++q) {
                lo[q] = group_row(q, g, grp);
                hi[q] = group_row(q, g + 8, grp);
              }
              have_grp = grp;
            }
            if (++in_group == per_group) {
              in_group = 0;
              ++grp;
            }
          }
#pragma unroll
          for (int q = 0; q < P; ++q) {
            clo[j][q] = lo[q];
            chi[j][q] = hi[q];
          }
          uint4 xa = make_uint4(0u, 0u, 0u, 0u), xb = xa;
          if (has_x && j < np) {
            const uint4* xp =
                reinterpret_cast<const uint4*>(x_lane + static_cast<int64_t>(ca + jp + j) * 64);
            xa = xp[0];
            xb = xp[1];
          }
          xw[j][0] = xa.x, xw[j][1] = xa.y, xw[j][2] = xa.z, xw[j][3] = xa.w;
          xw[j][4] = xb.x, xw[j][5] = xb.y, xw[j][6] = xb.z, xw[j][7] = xb.w;
        }
        float ps[JP][P][4];
#pragma unroll
        for (int j = 0; j < JP; ++j)
#pragma unroll
          for (int q = 0; q < P; ++q) ps[j][q][0] = ps[j][q][1] = ps[j][q][2] = ps[j][q][3] = 0.0f;
#pragma unroll
        for (int kb = 0; kb < 4; ++kb)
#pragma unroll
          for (int j = 0; j < JP; ++j)
#pragma unroll
            for (int q = 0; q < P; ++q) {
              const uint4 v = cur[j][q];
              const uint32_t w = kb == 0 ? v.x : kb == 1 ? v.y : kb == 2 ? v.z : v.w;
              uint32_t a[4];
#pragma unroll
              for (int r = 0; r < 4; ++r)
                a[r] = Op::sub(((w >> (4 * r)) & 0x000F000Fu) | Op::kMagic,
                               (r & 1) ? chi[j][q].zero_pair : clo[j][q].zero_pair);
              Op::run(ps[j][q], a, xw[j][2 * kb], xw[j][2 * kb + 1]);
            }
#pragma unroll
        for (int j = 0; j < JP; ++j) {
          if (j >= np) break;
#pragma unroll
          for (int q = 0; q < P; ++q) {
            acc[q][0] = fmaf(clo[j][q].scale, ps[j][q][0], acc[q][0]);
            acc[q][1] = fmaf(clo[j][q].scale, ps[j][q][1], acc[q][1]);
            acc[q][2] = fmaf(chi[j][q].scale, ps[j][q][2], acc[q][2]);
            acc[q][3] = fmaf(chi[j][q].scale, ps[j][q][3], acc[q][3]);
          }
        }
      }
      // The slot's next stage, once every lane has used what it read from it (its loads have
      // returned, so the copy cannot overtake them). No proxy fence here: fence.proxy.async
      // compiles to MEMBAR.ALL.CTA, which waited for this thread's copies in flight, one memory
      // latency per stage (run 71: 258 tok/s, the ring's depth made no difference).
      __syncwarp();
      if (lane == 0) issue_next(slot);
      if (++slot == NS) {
        slot = 0;
        phase ^= 1u;
      }
    }
    // The warp's partial sums, [tile row][activation row]; then their sum in warp order in warp
    // 0's slots, as the tile kernel adds them.
    float* mine = red(ti, warp);
#pragma unroll
    for (int q = 0; q < P; ++q) {
      const int r = q * kInt4TileRows + g, col = 2 * t;
      mine[r * kRedCols + col] = acc[q][0];
      mine[r * kRedCols + col + 1] = acc[q][1];
      mine[(r + 8) * kRedCols + col] = acc[q][2];
      mine[(r + 8) * kRedCols + col + 1] = acc[q][3];
    }
    __syncthreads();
    float* sum = red(ti, 0);
    for (int i = threadIdx.x; i < kRedRows * kRedCols; i += W * 32) {
      if (i % kRedCols >= m) continue;
      float v = sum[i];
#pragma unroll
      for (int w = 1; w < W; ++w) v += red(ti, w)[i];
      sum[i] = v;
    }
    __syncthreads();
    tile_epilogue<T, P, kRedCols>(L, part, tile, sum, m);
  }
#endif
}

template <typename T, bool NORM>
cudaError_t launch(const StreamArgs& A, const T* x, int64_t m, unsigned blocks,
                   cudaStream_t stream) {
  static std::atomic<size_t> configured{0};
  const cudaError_t e = allow_dynamic_smem(quant_gemv_stream_kernel<T, NORM>, A.smem, configured);
  if (e != cudaSuccess) return e;
  return launch_kernel(quant_gemv_stream_kernel<T, NORM>, dim3(blocks), dim3(kStreamWarps * 32),
                       A.smem, stream, A, x, static_cast<int>(m));
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

}  // namespace

int32_t stream_ring_stages(const QuantPart& p, int64_t m, int64_t tasks, int64_t smem_per_sm,
                           int sm_count) {
  return stream_args(p, m, smem_per_sm, tasks, sm_count).stages;
}

bool stream_kernel_takes(const QuantPart* parts, int nparts, int64_t m) {
  if (nparts < 1 || m < 1 || m > kRedCols) return false;
  const QuantPart& p0 = parts[0];
  for (int i = 0; i < nparts; ++i) {
    const QuantPart& p = parts[i];
    if (!p.int4_tiles || p.one_row_gemv || m > p.int4_stream_max_m || p.k != p0.k ||
        p.group_size != p0.group_size || p.scale_dtype != p0.scale_dtype ||
        (p.zeros == nullptr) != (p0.zeros == nullptr) || !aligned16(p.data) ||
        !aligned16(p.scales) || (p.zeros != nullptr && !aligned16(p.zeros)))
      return false;
  }
  if (p0.k % kInt4TileK != 0 || p0.group_size % kInt4TileK != 0 || p0.k % p0.group_size != 0)
    return false;
  const DeviceLimits d = current_device_limits();
  if (d.major < 9) return false;
  const StreamArgs A = stream_args(p0, m, smem_per_sm(d), 0, d.sm_count);
  return A.smem <= static_cast<uint32_t>(d.smem_optin);
}

cudaError_t launch_gemv_stream(const TileLaunch& L, DType act, const void* x, int64_t m,
                               cudaStream_t stream) {
  const QuantPart& p0 = L.parts[0];
  const int tasks = L.plan.tasks();
  if (tasks <= 0) return cudaSuccess;
  const DeviceLimits d = current_device_limits();
  StreamArgs A = stream_args(p0, m, smem_per_sm(d), tasks, d.sm_count);
  A.L = L;
  const unsigned blocks =
      static_cast<unsigned>(std::min(tasks, d.sm_count * stream_blocks_per_sm(p0)));
  cudaError_t err = cudaSuccess;
  LATHE_DISPATCH_ACT(act, T, {
    const T* xt = static_cast<const T*>(x);
    err = L.norm.residual != nullptr ? launch<T, true>(A, xt, m, blocks, stream)
                                     : launch<T, false>(A, xt, m, blocks, stream);
  });
  return err;
}

}  // namespace lathe::cuda::quant
