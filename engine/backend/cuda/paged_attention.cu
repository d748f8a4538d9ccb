#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>

#include "engine/backend/cuda/cuda_common.h"
#include "engine/backend/cuda/kernel_utils.cuh"
#include "engine/backend/cuda/kv_cache.h"
#include "engine/backend/cuda/paged_attention.h"

namespace lathe::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kTile = 32;  // positions per K/V tile: one per lane in the score phase
constexpr int kMaxGroup = 16;
constexpr int kHeadsPerWarp = kMaxGroup / kWarps;
constexpr int kMaxHeadDim = 256;
constexpr int kMaxItems =
    kMaxGroup * kMaxHeadDim / 2 / kThreads;  // (head, dim pair) items per thread
constexpr int kPad =
    8;  // elements of padding per staged row: 16-byte reads of 8 lanes hit distinct banks

// Shared memory of the main kernel: K and V tiles (2 stages), q in float, probabilities, stats.
int64_t smem_bytes(int64_t head_dim, int64_t group) {
  return 2 * 2 * kTile * (head_dim + kPad) * 2 + group * head_dim * 4 + group * kTile * 4 +
         group * 4 + group * 2 * 4;
}

struct QueryRange {
  int32_t seq;
  int32_t kv_len;  // positions [lo, kv_len) are attended
  int32_t lo;
  int32_t splits;
};

__device__ __forceinline__ QueryRange query_range(const PagedAttentionArgs& a, int32_t t) {
  int32_t lo_s = 0, hi_s = a.num_seqs - 1;  // the last sequence whose first token is <= t
  while (lo_s < hi_s) {
    const int32_t mid = (lo_s + hi_s + 1) >> 1;
    if (a.query_start[mid] <= t) {
      lo_s = mid;
    } else {
      hi_s = mid - 1;
    }
  }
  QueryRange r;
  r.seq = lo_s;
  const int32_t q0 = a.query_start[lo_s];
  const int32_t qlen = a.query_start[lo_s + 1] - q0;
  r.kv_len = max(0, a.seq_lens[lo_s] - qlen + (t - q0) + 1);
  r.lo = a.sliding_window > 0 ? max(0, r.kv_len - a.sliding_window) : 0;
  const int32_t n = r.kv_len - r.lo;
  r.splits =
      min(a.max_splits, max(1, (n + kAttentionMinSplitTokens - 1) / kAttentionMinSplitTokens));
  return r;
}

template <typename T>
struct Pair;
template <>
struct Pair<__nv_bfloat16> {
  using type = __nv_bfloat162;
  static __device__ __forceinline__ float2 to_float2(type v) { return __bfloat1622float2(v); }
  static __device__ __forceinline__ type from_float2(float2 v) { return __float22bfloat162_rn(v); }
};
template <>
struct Pair<__half> {
  using type = __half2;
  static __device__ __forceinline__ float2 to_float2(type v) { return __half22float2(v); }
  static __device__ __forceinline__ type from_float2(float2 v) { return __float22half2_rn(v); }
};

template <typename T>
__global__ void __launch_bounds__(kThreads) attention_kernel(PagedAttentionArgs a, int log2d) {
  using P2 = Pair<T>;
  extern __shared__ __align__(16) uint8_t smem[];
  const int32_t d = a.head_dim, group = a.num_heads / a.num_kv_heads;
  const int32_t row = d + kPad;
  T* ks = reinterpret_cast<T*>(smem);
  T* vs = ks + 2 * kTile * row;
  float* q_sm = reinterpret_cast<float*>(vs + 2 * kTile * row);
  float* p_sm = q_sm + group * d;
  float* alpha_sm = p_sm + group * kTile;
  float* ml_sm = alpha_sm + group;

  pdl_begin();
  const int32_t t = blockIdx.x, kvh = blockIdx.y, split = blockIdx.z;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const QueryRange r = query_range(a, t);
  if (split >= r.splits) return;  // uniform over the block
  const int32_t n = r.kv_len - r.lo;
  const int32_t chunk = (n + r.splits - 1) / r.splits;
  const int32_t begin = r.lo + split * chunk;
  const int32_t end = min(r.kv_len, begin + chunk);
  const int32_t num_tiles = end > begin ? (end - begin + kTile - 1) / kTile : 0;

  const T* q = static_cast<const T*>(a.q) + static_cast<int64_t>(t) * a.q_stride +
               static_cast<int64_t>(kvh) * group * d;
  for (int i = tid; i < group * d; i += kThreads) q_sm[i] = to_float(q[i]);

  const T* kc = static_cast<const T*>(a.k_cache);
  const T* vc = static_cast<const T*>(a.v_cache);
  const int32_t* pages = a.kv_indices + a.kv_indptr[r.seq];
  const int log2v = log2d - 3;  // 8-element vectors per row
  auto load_tile = [&](int stage, int32_t tile_start) {
    for (int idx = tid; idx < (kTile << log2v); idx += kThreads) {
      const int p = idx >> log2v, c = idx & ((1 << log2v) - 1);
      const int32_t pos = tile_start + p;
      if (pos < end) {
        const int64_t page = pages[pos / a.block_size];
        const int64_t src =
            ((page * a.block_size + pos % a.block_size) * a.num_kv_heads + kvh) * d + c * 8;
        const int64_t dst = (static_cast<int64_t>(stage) * kTile + p) * row + c * 8;
        cp_async16(ks + dst, kc + src, 16);
        cp_async16(vs + dst, vc + src, 16);
      }
    }
  };

  float m_run[kHeadsPerWarp], l_run[kHeadsPerWarp];
#pragma unroll
  for (int i = 0; i < kHeadsPerWarp; ++i) m_run[i] = -INFINITY, l_run[i] = 0.f;
  float2 acc[kMaxItems];
#pragma unroll
  for (int k = 0; k < kMaxItems; ++k) acc[k] = make_float2(0.f, 0.f);
  const int num_items = group * d / 2;

  if (num_tiles > 0) load_tile(0, begin);
  cp_async_commit();
  for (int it = 0; it < num_tiles; ++it) {
    if (it + 1 < num_tiles) load_tile((it + 1) & 1, begin + (it + 1) * kTile);
    cp_async_commit();
    cp_async_wait<1>();  // tile `it` has landed (only the group just issued may be in flight)
    __syncthreads();
    const int stage = it & 1;
    const int32_t tile_start = begin + it * kTile;
    const int valid = min(kTile, end - tile_start);

    // Scores: lane = position in the tile; warp w handles heads w, w + 4, ...
    float sc[kHeadsPerWarp];
#pragma unroll
    for (int i = 0; i < kHeadsPerWarp; ++i) sc[i] = 0.f;
    const T* krow = ks + (static_cast<int64_t>(stage) * kTile + lane) * row;
    for (int dd = 0; dd < d; dd += 8) {
      float kf[8];
      load8(krow + dd, kf);
#pragma unroll
      for (int i = 0; i < kHeadsPerWarp; ++i) {
        const int g = warp + kWarps * i;
        if (g < group) {
          const float4 q0 = *reinterpret_cast<const float4*>(q_sm + g * d + dd);
          const float4 q1 = *reinterpret_cast<const float4*>(q_sm + g * d + dd + 4);
          float s = sc[i];
          s = fmaf(q0.x, kf[0], s);
          s = fmaf(q0.y, kf[1], s);
          s = fmaf(q0.z, kf[2], s);
          s = fmaf(q0.w, kf[3], s);
          s = fmaf(q1.x, kf[4], s);
          s = fmaf(q1.y, kf[5], s);
          s = fmaf(q1.z, kf[6], s);
          s = fmaf(q1.w, kf[7], s);
          sc[i] = s;
        }
      }
    }
#pragma unroll
    for (int i = 0; i < kHeadsPerWarp; ++i) {
      const int g = warp + kWarps * i;
      if (g < group) {  // uniform over the warp
        const float s = lane < valid ? sc[i] * a.scale : -INFINITY;
        const float m_new = fmaxf(m_run[i], warp_max(s));
        const float p = s == -INFINITY ? 0.f : expf(s - m_new);
        const float alpha = m_run[i] == -INFINITY ? 0.f : expf(m_run[i] - m_new);
        l_run[i] = l_run[i] * alpha + warp_sum(p);
        m_run[i] = m_new;
        p_sm[g * kTile + lane] = p;
        if (lane == 0) alpha_sm[g] = alpha;
      }
    }
    __syncthreads();

    // Weighted sum of V: thread item = (head g, dimension pair dp).
    const T* vstage = vs + static_cast<int64_t>(stage) * kTile * row;
#pragma unroll
    for (int k = 0; k < kMaxItems; ++k) {
      const int i = tid + k * kThreads;
      if (i < num_items) {
        const int g = i >> (log2d - 1), dp = i & ((d >> 1) - 1);
        const float al = alpha_sm[g];
        float a0 = acc[k].x * al, a1 = acc[k].y * al;
        const float* prow = p_sm + g * kTile;
        const T* vcol = vstage + 2 * dp;
        for (int p = 0; p < valid; ++p) {
          const float pr = prow[p];
          const float2 v =
              P2::to_float2(*reinterpret_cast<const typename P2::type*>(vcol + p * row));
          a0 = fmaf(pr, v.x, a0);
          a1 = fmaf(pr, v.y, a1);
        }
        acc[k] = make_float2(a0, a1);
      }
    }
    __syncthreads();  // the stage is overwritten by the load issued next iteration
  }
  cp_async_wait<0>();

#pragma unroll
  for (int i = 0; i < kHeadsPerWarp; ++i) {
    const int g = warp + kWarps * i;
    if (g < group && lane == 0) {
      ml_sm[2 * g] = m_run[i];
      ml_sm[2 * g + 1] = l_run[i];
    }
  }
  __syncthreads();

  const int64_t hq0 = static_cast<int64_t>(kvh) * group;
#pragma unroll
  for (int k = 0; k < kMaxItems; ++k) {
    const int i = tid + k * kThreads;
    if (i < num_items) {
      const int g = i >> (log2d - 1), dp = i & ((d >> 1) - 1);
      const int64_t hq = hq0 + g;
      if (r.splits == 1) {
        const float l = ml_sm[2 * g + 1];
        const float inv = l > 0.f ? 1.0f / l : 0.f;
        T* o = static_cast<T*>(a.out) + (static_cast<int64_t>(t) * a.num_heads + hq) * d + 2 * dp;
        *reinterpret_cast<typename P2::type*>(o) =
            P2::from_float2(make_float2(acc[k].x * inv, acc[k].y * inv));
      } else {
        const int64_t part = (static_cast<int64_t>(t) * a.num_heads + hq) * a.max_splits + split;
        *reinterpret_cast<float2*>(a.workspace + part * d + 2 * dp) = acc[k];
        if (dp == 0) {
          float* ml = a.workspace +
                      static_cast<int64_t>(a.num_tokens) * a.num_heads * a.max_splits * d +
                      2 * part;
          ml[0] = ml_sm[2 * g];
          ml[1] = ml_sm[2 * g + 1];
        }
      }
    }
  }
}

// Merges the split partial results of queries with more than one split.
template <typename T>
__global__ void __launch_bounds__(kThreads) merge_kernel(PagedAttentionArgs a) {
  __shared__ float w_sm[kAttentionMaxSplits];
  __shared__ float inv_l;
  pdl_begin();
  const int32_t t = blockIdx.x, hq = blockIdx.y;
  const QueryRange r = query_range(a, t);
  if (r.splits <= 1) return;
  const int64_t part0 = (static_cast<int64_t>(t) * a.num_heads + hq) * a.max_splits;
  const float* ml =
      a.workspace + static_cast<int64_t>(a.num_tokens) * a.num_heads * a.max_splits * a.head_dim;
  if (threadIdx.x < 32) {
    const int i = threadIdx.x;
    const float m = i < r.splits ? ml[2 * (part0 + i)] : -INFINITY;
    const float l = i < r.splits ? ml[2 * (part0 + i) + 1] : 0.f;
    const float m_max = warp_max(m);
    const float w = m == -INFINITY ? 0.f : expf(m - m_max);
    const float total = warp_sum(l * w);
    if (i < kAttentionMaxSplits) w_sm[i] = w;
    if (i == 0) inv_l = total > 0.f ? 1.0f / total : 0.f;
  }
  __syncthreads();
  T* o = static_cast<T*>(a.out) + (static_cast<int64_t>(t) * a.num_heads + hq) * a.head_dim;
  for (int dd = threadIdx.x; dd < a.head_dim; dd += kThreads) {
    float s = 0.f;
    for (int i = 0; i < r.splits; ++i)
      s = fmaf(a.workspace[(part0 + i) * a.head_dim + dd], w_sm[i], s);
    o[dd] = from_float<T>(s * inv_l);
  }
}

template <typename T>
Status launch(const PagedAttentionArgs& a, int log2d, cudaStream_t stream) {
  static std::once_flag once;
  static cudaError_t attr_err = cudaSuccess;
  const int64_t max_smem = smem_bytes(kMaxHeadDim, kMaxGroup);
  std::call_once(once, [&] {
    attr_err =
        cudaFuncSetAttribute(attention_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(max_smem));
  });
  if (attr_err != cudaSuccess)
    return cuda_error(attr_err, "cudaFuncSetAttribute(attention_kernel)");
  const int64_t smem = smem_bytes(a.head_dim, a.num_heads / a.num_kv_heads);
  const dim3 grid(static_cast<unsigned>(a.num_tokens), static_cast<unsigned>(a.num_kv_heads),
                  static_cast<unsigned>(a.max_splits));
  cudaError_t err = launch_kernel(attention_kernel<T>, grid, dim3(kThreads),
                                  static_cast<size_t>(smem), stream, a, log2d);
  if (err != cudaSuccess) return cuda_error(err, "launch of attention_kernel");
  LATHE_RETURN_IF_ERROR(check_launch("attention_kernel"));
  if (a.max_splits > 1) {
    err =
        launch_kernel(merge_kernel<T>,
                      dim3(static_cast<unsigned>(a.num_tokens), static_cast<unsigned>(a.num_heads)),
                      dim3(kThreads), 0, stream, a);
    if (err != cudaSuccess) return cuda_error(err, "launch of attention merge_kernel");
    LATHE_RETURN_IF_ERROR(check_launch("attention merge_kernel"));
  }
  return Status();
}

}  // namespace

int64_t paged_attention_workspace_bytes(int64_t num_tokens, int64_t num_heads, int64_t head_dim,
                                        int32_t max_splits) {
  if (max_splits <= 1) return 0;
  return num_tokens * num_heads * max_splits * (head_dim + 2) * static_cast<int64_t>(sizeof(float));
}

int32_t paged_attention_splits_for(int64_t num_tokens, int64_t num_kv_heads, int sm_count) {
  const int64_t blocks = std::max<int64_t>(1, num_tokens * num_kv_heads);
  const int64_t want = ceil_div(2 * static_cast<int64_t>(sm_count), blocks);
  return static_cast<int32_t>(std::clamp<int64_t>(want, 1, kAttentionMaxSplits));
}

Status paged_attention(const PagedAttentionArgs& a, cudaStream_t stream) {
  if (!is_act_dtype(a.dtype)) return invalid_argument("paged_attention: dtype must be bf16 or f16");
  LATHE_RETURN_IF_ERROR(check_kv_dtype("paged_attention", a.dtype, a.kv_dtype));
  int log2d = 0;
  while ((1 << log2d) < a.head_dim) ++log2d;
  if (a.head_dim < 16 || a.head_dim > kMaxHeadDim || (1 << log2d) != a.head_dim)
    return unsupported("paged_attention: head_dim must be 16, 32, 64, 128 or 256, got " +
                       std::to_string(a.head_dim));
  if (a.num_kv_heads <= 0 || a.num_heads % a.num_kv_heads != 0 ||
      a.num_heads / a.num_kv_heads > kMaxGroup)
    return unsupported(
        "paged_attention: num_heads / num_kv_heads must be an integer of at most 16");
  if (a.max_splits < 1 || a.max_splits > kAttentionMaxSplits)
    return invalid_argument("paged_attention: max_splits must be in [1, 32]");
  if (a.max_splits > 1 && a.workspace == nullptr)
    return invalid_argument("paged_attention: split-KV needs a workspace");
  if (a.q_stride % 8 != 0)
    return invalid_argument("paged_attention: q rows must be 16-byte aligned");
  if (a.num_tokens <= 0) return Status();
  LATHE_DISPATCH_ACT(a.dtype, T, { return launch<T>(a, log2d, stream); });
  return Status();
}

}  // namespace lathe::cuda
