#include "engine/backend/cuda/decode_attention.h"

#include <cooperative_groups.h>

#include <algorithm>
#include <atomic>
#include <string>

#include "engine/backend/cuda/cuda_common.h"
#include "engine/backend/cuda/kernel_utils.cuh"
#include "engine/backend/cuda/kv_cache.h"
#include "engine/backend/cuda/mma.cuh"

namespace lathe::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kTile = 16;   // positions per tile: the k extent of one P.V mma, two n8 tiles of S
constexpr int kStages = 2;  // cp.async stages per warp
constexpr int kMaxGroup = kDecodeAttentionMaxGroup;
constexpr int kMergeSlots = 32;  // >= kWarps and >= kDecodeAttentionMaxSplits
static_assert(kMergeSlots >= kWarps && kMergeSlots >= kDecodeAttentionMaxSplits);
constexpr int kMaxCluster = kDecodeAttentionMaxClusterSplits;
static_assert(kMaxCluster <= kMergeSlots);

// The cluster merge exists in sm_90 code only; the host launches clusters only for such code.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define LATHE_DECODE_CLUSTER_MERGE 1
#endif

// Shared-memory geometry for one head_dim. Rows are padded by 16 bytes so that the 8 row addresses
// of an ldmatrix fall in distinct bank groups.
template <int D>
struct Geometry {
  static constexpr int kRow = D + 8;                              // elements per staged row
  static constexpr int kStageElems = 2 * kTile * kRow;            // K tile, then V tile
  static constexpr int kWarpElems = kStages * kStageElems;        // a warp's ring
  static constexpr int kSmemBytes = kWarps * kWarpElems * 2;      // 16-bit elements
  static constexpr int kMergeBytes = kWarps * kMaxGroup * D * 4;  // reused after the loop
  static constexpr int kPartBytes = kMaxGroup * D * 4;  // the block's partial, for its cluster
  static_assert(kMergeBytes + kPartBytes <= kSmemBytes, "merge areas must fit in the stages");
};

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

// `n` cluster barriers (arrive + wait), for blocks of a cluster launch that merge nothing.
__device__ __forceinline__ void cluster_barriers(int n) {
#ifdef LATHE_DECODE_CLUSTER_MERGE
  for (int i = 0; i < n; ++i) cooperative_groups::this_cluster().sync();
#endif
}

struct Range {
  int32_t kv_len;  // the query sits at kv_len - 1
  int32_t begin, end;
  int32_t splits;
};

// The block's positions. Every block of a sequence computes the same split count and chunk.
__device__ __forceinline__ Range block_range(const DecodeAttentionArgs& a, int32_t seq,
                                             int32_t split) {
  Range r;
  r.kv_len = a.seq_lens[seq];
  const int32_t lo = a.sliding_window > 0 ? max(0, r.kv_len - a.sliding_window) : 0;
  const int32_t n = max(0, r.kv_len - lo);
  const int32_t want = min(a.max_splits, max(1, (n + a.min_split_tokens - 1) / a.min_split_tokens));
  const int32_t per = (n + want - 1) / want;
  const int32_t chunk = max(kTile, (per + kTile - 1) / kTile * kTile);
  r.splits = max(1, (n + chunk - 1) / chunk);
  r.begin = lo + split * chunk;
  r.end = min(r.kv_len, r.begin + chunk);
  return r;
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads, 3)
    decode_attention_kernel(const DecodeAttentionArgs a) {
  using G = Geometry<D>;
  using M = Mma<T>;
  extern __shared__ __align__(16) uint8_t smem[];
  __shared__ float m_sm[kWarps][kMaxGroup], l_sm[kWarps][kMaxGroup];
  __shared__ float wgt_sm[kMaxGroup][kMergeSlots];  // merge weights per head (warps or splits)
  __shared__ float blk_m[kMaxGroup], blk_l[kMaxGroup];
  __shared__ int last_sm;
  // Launched as clusters of max_splits blocks along z (the host sets this only then): every block
  // of the cluster passes the same two cluster barriers, whatever it computes.
  const bool cluster = a.cluster_merge;

  const int32_t seq = blockIdx.x, kvh = blockIdx.y, split = blockIdx.z;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int gq = lane >> 2, tq = lane & 3;  // mma fragment row group and column pair
  const int32_t group = a.num_heads / a.num_kv_heads;

  // Step inputs and earlier positions' K/V were written before this step's first kernel: reading
  // them before pdl_wait() is safe. Only the newest position (written by the previous kernel)
  // waits.
  const Range r = block_range(a, seq, split);
  if (split >= r.splits) {
    pdl_trigger();
    if (cluster) cluster_barriers(2);
    return;
  }
  const int32_t num_tiles = r.end > r.begin ? (r.end - r.begin + kTile - 1) / kTile : 0;
  const int32_t newest = r.kv_len - 1;
  const int32_t* pages = a.kv_indices + a.kv_indptr[seq];
  const T* kc = static_cast<const T*>(a.k_cache);
  const T* vc = static_cast<const T*>(a.v_cache);
  T* ring = reinterpret_cast<T*>(smem) + warp * G::kWarpElems;

  // The warp's tiles are warp, warp + 4, ...; tile i starts at begin + 16 i.
  const int32_t my_tiles = warp < num_tiles ? (num_tiles - warp + kWarps - 1) / kWarps : 0;
  auto tile_start = [&](int32_t j) { return r.begin + (warp + j * kWarps) * kTile; };
  auto holds_newest = [&](int32_t j) {
    const int32_t s = tile_start(j);
    return newest >= s && newest < s + kTile;
  };
  // Element offset of the K/V row of each position of tile j (lanes 0..15; -1 past the end).
  auto row_offsets = [&](int32_t j) -> int64_t {
    if (j >= my_tiles || lane >= kTile) return -1;
    const int32_t pos = tile_start(j) + lane;
    if (pos >= r.end) return -1;
    const int64_t page = pages[pos / a.block_size];
    return ((page * a.block_size + pos % a.block_size) * a.num_kv_heads + kvh) * D;
  };
  // Issues tile j into stage (j % 2): each lane copies D / 8 * 16 * 2 / 32 vectors.
  auto issue = [&](int32_t j, int64_t offs) {
    T* ks = ring + (j % kStages) * G::kStageElems;
    T* vs = ks + kTile * G::kRow;
    constexpr int kVecPerRow = D / 8;
    constexpr int kRowsPerPass = 32 / kVecPerRow;
    const int c = lane % kVecPerRow;
#pragma unroll
    for (int pass = 0; pass < kTile / kRowsPerPass; ++pass) {
      const int row = pass * kRowsPerPass + lane / kVecPerRow;
      const int64_t off = __shfl_sync(0xffffffffu, offs, row);
      const int bytes = off >= 0 ? 16 : 0;
      const int64_t src = (off >= 0 ? off : 0) + c * 8;
      cp_async16(ks + row * G::kRow + c * 8, kc + src, bytes);
      cp_async16(vs + row * G::kRow + c * 8, vc + src, bytes);
    }
  };

  int64_t offs0 = row_offsets(0), offs1 = row_offsets(1);
  const bool pre0 = my_tiles > 0 && !holds_newest(0);
  const bool pre1 = my_tiles > 1 && !holds_newest(1);
  if (pre0) issue(0, offs0);
  if (pre1) issue(1, offs1);

  pdl_wait();
  pdl_trigger();

  if (my_tiles > 0 && !pre0) issue(0, offs0);
  cp_async_commit();
  if (my_tiles > 1 && !pre1) issue(1, offs1);
  cp_async_commit();
  int64_t offs_next = row_offsets(2);

  // Q of the group as mma A fragments (rows = query heads, zero past the group).
  uint32_t qa[D / 16][4];
  {
    const T* q = static_cast<const T*>(a.q) + static_cast<int64_t>(seq) * a.q_stride +
                 static_cast<int64_t>(kvh) * group * D;
    const uint32_t* q0 = reinterpret_cast<const uint32_t*>(q + gq * D);
    const uint32_t* q1 = reinterpret_cast<const uint32_t*>(q + (gq + 8) * D);
    const bool h0 = gq < group, h1 = gq + 8 < group;
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      const int w0 = (ks * 16 + 2 * tq) / 2, w1 = (ks * 16 + 8 + 2 * tq) / 2;
      qa[ks][0] = h0 ? q0[w0] : 0u;
      qa[ks][1] = h1 ? q1[w0] : 0u;
      qa[ks][2] = h0 ? q0[w1] : 0u;
      qa[ks][3] = h1 ? q1[w1] : 0u;
    }
  }

  float o[D / 8][4];
#pragma unroll
  for (int j = 0; j < D / 8; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;  // heads gq and gq + 8

  for (int32_t j = 0; j < my_tiles; ++j) {
    cp_async_wait<1>();  // tile j has landed (only tile j + 1 may be in flight)
    __syncwarp();
    const T* ks = ring + (j % kStages) * G::kStageElems;
    const T* vs = ks + kTile * G::kRow;
    const int32_t t0 = tile_start(j);

    // S = Q K^T: two n8 tiles (positions 0-7, 8-15). ldmatrix x4 matrices: (pos 0-7, dims +0),
    // (pos 0-7, dims +8), (pos 8-15, dims +0), (pos 8-15, dims +8).
    float s[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
    {
      const int mat = lane >> 3;
      const T* base = ks + ((mat >> 1) * 8 + (lane & 7)) * G::kRow + (mat & 1) * 8;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t b[4];
        ldmatrix_x4(b, base + kk * 16);
        M::run(s[0], qa[kk], b[0], b[1]);
        M::run(s[1], qa[kk], b[2], b[3]);
      }
    }
    // Scale, mask, online softmax. Thread holds S[gq][n8 * 8 + 2 tq + {0,1}] in s[n8][0..1] and
    // S[gq + 8][...] in s[n8][2..3].
    float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
    for (int n8 = 0; n8 < 2; ++n8)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const bool ok = t0 + n8 * 8 + 2 * tq + e < r.end;
        s[n8][e] = ok ? s[n8][e] * a.scale : -INFINITY;
        s[n8][2 + e] = ok ? s[n8][2 + e] * a.scale : -INFINITY;
        mx0 = fmaxf(mx0, s[n8][e]);
        mx1 = fmaxf(mx1, s[n8][2 + e]);
      }
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
    const float n0 = fmaxf(m0, mx0), n1 = fmaxf(m1, mx1);
    const float al0 = m0 == -INFINITY ? 0.f : expf(m0 - n0);
    const float al1 = m1 == -INFINITY ? 0.f : expf(m1 - n1);
    m0 = n0, m1 = n1;
    float p[2][4];
#pragma unroll
    for (int n8 = 0; n8 < 2; ++n8)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        p[n8][e] = s[n8][e] == -INFINITY ? 0.f : expf(s[n8][e] - n0);
        p[n8][2 + e] = s[n8][2 + e] == -INFINITY ? 0.f : expf(s[n8][2 + e] - n1);
      }
    l0 = l0 * al0 + ((p[0][0] + p[0][1]) + (p[1][0] + p[1][1]));
    l1 = l1 * al1 + ((p[0][2] + p[0][3]) + (p[1][2] + p[1][3]));
#pragma unroll
    for (int jd = 0; jd < D / 8; ++jd) {
      o[jd][0] *= al0, o[jd][1] *= al0;
      o[jd][2] *= al1, o[jd][3] *= al1;
    }
    // P as the A operand (16 heads x 16 positions), split into hi + lo 16-bit parts.
    uint32_t ph[4], pl[4];
    {
      const float src[4][2] = {
          {p[0][0], p[0][1]}, {p[0][2], p[0][3]}, {p[1][0], p[1][1]}, {p[1][2], p[1][3]}};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        ph[i] = M::pack(src[i][0], src[i][1]);
        const float2 h = M::unpack(ph[i]);
        pl[i] = M::pack(src[i][0] - h.x, src[i][1] - h.y);
      }
    }
    // O += P V: per 16 dims one ldmatrix x4 trans: (pos 0-7, dims +0), (pos 8-15, dims +0),
    // (pos 0-7, dims +8), (pos 8-15, dims +8).
    {
      const int mat = lane >> 3;
      const T* base = vs + ((mat & 1) * 8 + (lane & 7)) * G::kRow + (mat >> 1) * 8;
#pragma unroll
      for (int jd = 0; jd < D / 16; ++jd) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, base + jd * 16);
        M::run(o[2 * jd], ph, b[0], b[1]);
        M::run(o[2 * jd], pl, b[0], b[1]);
        M::run(o[2 * jd + 1], ph, b[2], b[3]);
        M::run(o[2 * jd + 1], pl, b[2], b[3]);
      }
    }
    __syncwarp();  // every lane is done with this stage before it is refilled
    if (j + 2 < my_tiles) issue(j + 2, offs_next);
    cp_async_commit();
    offs_next = row_offsets(j + 3);
  }
  cp_async_wait<0>();
  l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
  l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 2);

  // Merge the four warps through shared memory (the stage buffers are free now).
  __syncthreads();
  float* o_sm = reinterpret_cast<float*>(smem);  // [kWarps][group][D]
  if (tq == 0) {
    m_sm[warp][gq] = m0, l_sm[warp][gq] = l0;
    m_sm[warp][gq + 8] = m1, l_sm[warp][gq + 8] = l1;
  }
#pragma unroll
  for (int jd = 0; jd < D / 8; ++jd) {
    const int d = jd * 8 + 2 * tq;
    if (gq < group)
      *reinterpret_cast<float2*>(o_sm + (warp * group + gq) * D + d) =
          make_float2(o[jd][0], o[jd][1]);
    if (gq + 8 < group)
      *reinterpret_cast<float2*>(o_sm + (warp * group + gq + 8) * D + d) =
          make_float2(o[jd][2], o[jd][3]);
  }
  __syncthreads();
  // Per head: the block's max, the warps' weights exp(m_w - max) and the block's sum.
  if (threadIdx.x < group) {
    const int h = threadIdx.x;
    float mb = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mb = fmaxf(mb, m_sm[w][h]);
    float lb = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float e = m_sm[w][h] == -INFINITY ? 0.f : expf(m_sm[w][h] - mb);
      wgt_sm[h][w] = e;
      lb += e * l_sm[w][h];
    }
    blk_m[h] = mb;
    blk_l[h] = lb;
  }
  __syncthreads();

  const int64_t head0 = static_cast<int64_t>(seq) * a.num_heads + static_cast<int64_t>(kvh) * group;
  if (r.splits == 1) {
    T* out = static_cast<T*>(a.out) + head0 * D;
    for (int i = threadIdx.x; i < group * D; i += kThreads) {
      const int h = i / D, d = i % D;
      float acc = 0.f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) acc = fmaf(wgt_sm[h][w], o_sm[(w * group + h) * D + d], acc);
      const float l = blk_l[h];
      out[i] = from_float<T>(l > 0.f ? acc / l : 0.f);
    }
    if (cluster) cluster_barriers(2);
    return;
  }

#ifdef LATHE_DECODE_CLUSTER_MERGE
  if (cluster) {
    // The block's partial (unnormalized output; blk_m / blk_l hold its max and sum) stays in its
    // shared memory; after the first barrier every split's partial can be read. Block `split`
    // merges elements [split * per, (split + 1) * per) of the group's group x D outputs.
    namespace cg = cooperative_groups;
    cg::cluster_group cl = cg::this_cluster();
    __shared__ float split_l[kMaxGroup][kMaxCluster];
    __shared__ float merged_l[kMaxGroup];
    float* part = reinterpret_cast<float*>(smem + G::kMergeBytes);  // [group][D]
    for (int i = threadIdx.x; i < group * D; i += kThreads) {
      const int h = i / D, d = i % D;
      float acc = 0.f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) acc = fmaf(wgt_sm[h][w], o_sm[(w * group + h) * D + d], acc);
      part[i] = acc;
    }
    cl.sync();
    // Every split's (max, sum) per head, then the merge weights exp(m_s - max) and the total sum.
    for (int i = threadIdx.x; i < group * r.splits; i += kThreads) {
      const int h = i / r.splits, sp = i % r.splits;
      wgt_sm[h][sp] = *cl.map_shared_rank(&blk_m[h], sp);
      split_l[h][sp] = *cl.map_shared_rank(&blk_l[h], sp);
    }
    __syncthreads();
    if (threadIdx.x < group) {
      const int h = threadIdx.x;
      float mx = -INFINITY;
      for (int sp = 0; sp < r.splits; ++sp) mx = fmaxf(mx, wgt_sm[h][sp]);
      float total = 0.f;
      for (int sp = 0; sp < r.splits; ++sp) {
        const float e = wgt_sm[h][sp] == -INFINITY ? 0.f : expf(wgt_sm[h][sp] - mx);
        wgt_sm[h][sp] = e;
        total += e * split_l[h][sp];
      }
      merged_l[h] = total;
    }
    __syncthreads();
    const int per = (group * D + r.splits - 1) / r.splits;
    const int end = min(group * D, (split + 1) * per);
    T* out = static_cast<T*>(a.out) + head0 * D;
    for (int i = split * per + threadIdx.x; i < end; i += kThreads) {
      const int h = i / D;
      float v[kMaxCluster];
#pragma unroll
      for (int sp = 0; sp < kMaxCluster; ++sp)  // all loads first: one remote latency, not 16
        v[sp] = sp < r.splits ? *cl.map_shared_rank(part + i, sp) : 0.f;
      float acc = 0.f;
#pragma unroll
      for (int sp = 0; sp < kMaxCluster; ++sp)
        if (sp < r.splits) acc = fmaf(wgt_sm[h][sp], v[sp], acc);
      const float l = merged_l[h];
      out[i] = from_float<T>(l > 0.f ? acc / l : 0.f);
    }
    cl.sync();  // no block leaves while another may still read its shared memory
    return;
  }
#endif

  // Partial of this split: unnormalized output, its max and sum.
  float* ws_o = a.workspace;
  float* ws_ml = a.workspace + static_cast<int64_t>(a.num_seqs) * a.num_heads * a.max_splits * D;
  for (int i = threadIdx.x; i < group * D; i += kThreads) {
    const int h = i / D, d = i % D;
    float acc = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) acc = fmaf(wgt_sm[h][w], o_sm[(w * group + h) * D + d], acc);
    ws_o[((head0 + h) * a.max_splits + split) * D + d] = acc;
  }
  if (threadIdx.x < group) {
    const int64_t part = (head0 + threadIdx.x) * a.max_splits + split;
    ws_ml[2 * part] = blk_m[threadIdx.x];
    ws_ml[2 * part + 1] = blk_l[threadIdx.x];
  }
  // The last block of this (sequence, KV head) to arrive merges the splits.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t* counter = a.counters + static_cast<int64_t>(seq) * a.num_kv_heads + kvh;
    last_sm = atomicAdd(counter, 1) == r.splits - 1;
  }
  __syncthreads();
  if (!last_sm) return;
  __threadfence();
  if (threadIdx.x < group) {
    const int h = threadIdx.x;
    const int64_t part0 = (head0 + h) * a.max_splits;
    float mx = -INFINITY;
    for (int sp = 0; sp < r.splits; ++sp) mx = fmaxf(mx, __ldcg(ws_ml + 2 * (part0 + sp)));
    float total = 0.f;
    for (int sp = 0; sp < r.splits; ++sp) {
      const float ms = __ldcg(ws_ml + 2 * (part0 + sp));
      const float e = ms == -INFINITY ? 0.f : expf(ms - mx);
      wgt_sm[h][sp] = e;
      total += e * __ldcg(ws_ml + 2 * (part0 + sp) + 1);
    }
    blk_l[h] = total;
  }
  __syncthreads();
  T* out = static_cast<T*>(a.out) + head0 * D;
  for (int i = threadIdx.x; i < group * D; i += kThreads) {
    const int h = i / D, d = i % D;
    const float* src = ws_o + (head0 + h) * a.max_splits * D + d;
    float acc = 0.f;
    for (int sp = 0; sp < r.splits; ++sp) acc = fmaf(wgt_sm[h][sp], __ldcg(src + sp * D), acc);
    const float l = blk_l[h];
    out[i] = from_float<T>(l > 0.f ? acc / l : 0.f);
  }
  if (threadIdx.x == 0) a.counters[static_cast<int64_t>(seq) * a.num_kv_heads + kvh] = 0;
}

// Opts the kernel in to its dynamic shared memory (once).
template <typename T, int D>
cudaError_t configure() {
  constexpr int kSmem = Geometry<D>::kSmemBytes;
  static std::atomic<bool> configured{false};
  if (kSmem > (48 << 10) && !configured.load(std::memory_order_relaxed)) {
    const cudaError_t err = cudaFuncSetAttribute(
        decode_attention_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
    if (err != cudaSuccess) return err;
    configured.store(true, std::memory_order_relaxed);
  }
  return cudaSuccess;
}

// The largest cluster (16 or 8 blocks) of this kernel the current device can run, 0 for none.
template <typename T, int D>
int32_t probe_cluster_splits() {
  auto kernel = decode_attention_kernel<T, D>;
  int device = 0, can_cluster = 0;
  cudaFuncAttributes fa{};
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&can_cluster, cudaDevAttrClusterLaunch, device) != cudaSuccess ||
      !can_cluster || cudaFuncGetAttributes(&fa, kernel) != cudaSuccess || fa.binaryVersion < 90 ||
      configure<T, D>() != cudaSuccess) {
    cudaGetLastError();  // a refused probe leaves no error for later launches to report
    return 0;
  }
  const bool non_portable =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) ==
      cudaSuccess;
  cudaGetLastError();
  for (int size : {kMaxCluster, 8}) {
    if (size > 8 && !non_portable) continue;
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = 1;
    attr.val.clusterDim.y = 1;
    attr.val.clusterDim.z = static_cast<unsigned>(size);
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(1, 1, static_cast<unsigned>(size));
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = Geometry<D>::kSmemBytes;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    int clusters = 0;
    if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg) == cudaSuccess && clusters > 0)
      return size;
    cudaGetLastError();
  }
  return 0;
}

template <typename T, int D>
int32_t cluster_splits() {
  static const int32_t splits = probe_cluster_splits<T, D>();  // one device type per process
  return splits;
}

template <typename T, int D>
cudaError_t launch(const DecodeAttentionArgs& a, cudaStream_t stream) {
  if (const cudaError_t err = configure<T, D>(); err != cudaSuccess) return err;
  DecodeAttentionArgs k = a;
  k.cluster_merge = a.cluster_merge && a.max_splits > 1 && a.max_splits <= cluster_splits<T, D>();
  const dim3 grid(static_cast<unsigned>(a.num_seqs), static_cast<unsigned>(a.num_kv_heads),
                  static_cast<unsigned>(a.max_splits));
  const dim3 cluster(1, 1, k.cluster_merge ? static_cast<unsigned>(a.max_splits) : 1);
  return launch_kernel_in_clusters(decode_attention_kernel<T, D>, grid, dim3(kThreads), cluster,
                                   Geometry<D>::kSmemBytes, stream, k);
}

}  // namespace

int32_t decode_attention_cluster_splits(DType dtype, int64_t head_dim) {
  if (!is_act_dtype(dtype) || (head_dim != 64 && head_dim != 128)) return 0;
  int32_t splits = 0;
  LATHE_DISPATCH_ACT(
      dtype, T, { splits = head_dim == 64 ? cluster_splits<T, 64>() : cluster_splits<T, 128>(); });
  return splits;
}

Status decode_attention(const DecodeAttentionArgs& a, cudaStream_t stream) {
  if (!is_act_dtype(a.dtype))
    return invalid_argument("decode_attention: dtype must be bf16 or f16");
  LATHE_RETURN_IF_ERROR(check_kv_dtype("decode_attention", a.dtype, a.kv_dtype));
  if (!decode_attention_supports(a.head_dim, a.num_heads, a.num_kv_heads))
    return unsupported(
        "decode_attention: head_dim 64 or 128 and at most 16 query heads per KV "
        "head, got head_dim " +
        std::to_string(a.head_dim) + ", " + std::to_string(a.num_heads) + "/" +
        std::to_string(a.num_kv_heads) + " heads");
  if (a.max_splits < 1 || a.max_splits > kDecodeAttentionMaxSplits)
    return invalid_argument("decode_attention: max_splits must be in [1, 32]");
  if (a.min_split_tokens < kTile || a.min_split_tokens % kTile != 0)
    return invalid_argument("decode_attention: min_split_tokens must be a positive multiple of 16");
  if (a.max_splits > 1 && (a.workspace == nullptr || a.counters == nullptr))
    return invalid_argument("decode_attention: split-KV needs a workspace and counters");
  if (a.q_stride % 8 != 0 || a.block_size <= 0)
    return invalid_argument("decode_attention: q rows must be 16-byte aligned, block_size > 0");
  if (a.num_seqs <= 0) return Status();
  cudaError_t err = cudaSuccess;
  LATHE_DISPATCH_ACT(a.dtype, T, {
    err = a.head_dim == 64 ? launch<T, 64>(a, stream) : launch<T, 128>(a, stream);
  });
  if (err != cudaSuccess) return cuda_error(err, "launch of decode_attention_kernel");
  return check_launch("decode_attention_kernel");
}

}  // namespace lathe::cuda
