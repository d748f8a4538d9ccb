#include <cstdint>

#include "engine/backend/cuda/cuda_common.h"
#include "engine/backend/cuda/kernel_utils.cuh"
#include "engine/backend/cuda/sample_tokens.h"
#include "engine/core/philox.h"

namespace lathe::cuda {
namespace {

constexpr int kThreads = 512;
constexpr int kScanVecs = 8;  // float4 loads in flight per thread in the max/argmax pass
constexpr int kWarps = kThreads / 32;
constexpr int kCopies =
    4;  // histogram copies: warps w and w + 4k share one, which bounds contention
constexpr double kFixedScale = 4503599627370496.0;  // 2^52: probabilities as exact-sum integers

// Shared state of one block (one row).
struct Smem {
  uint32_t cnt[kCopies][256];
  unsigned long long mass[kCopies][256];
  double red_d[kWarps];
  unsigned long long red_u[kWarps];
  float red_f[kWarps];
  int32_t red_i[kWarps];
  int32_t warp_counts[kWarps];
  int32_t sel;
  int32_t found;
  int64_t count_before;
  unsigned long long mass_before;
};

// One row's logits as the sampler reads them: NaN -> -inf (step 0) and, with a mask (constrained
// decoding), tokens whose bit is clear -> -inf (step 1's mask, applied on read: process_logits()
// leaves it here, and step 2 keeps -inf, so reading the mask late changes nothing).
struct RowLogits {
  const float* l;
  const uint32_t* mask;  // null: none
  __device__ __forceinline__ float operator()(int64_t i) const {
    const float v = l[i];
    if (isnan(v)) return -INFINITY;
    if (mask != nullptr && ((mask[i >> 5] >> (i & 31)) & 1u) == 0) return -INFINITY;
    return v;
  }
};

// Larger key = earlier in the order (value descending, id ascending).
__device__ __forceinline__ unsigned long long order_key(float v, int32_t i) {
  uint32_t b = __float_as_uint(v);
  b = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  return (static_cast<unsigned long long>(b) << 32) | (0xffffffffu - static_cast<uint32_t>(i));
}
__device__ __forceinline__ int32_t key_id(unsigned long long k) {
  return static_cast<int32_t>(0xffffffffu - static_cast<uint32_t>(k & 0xffffffffu));
}

__device__ __forceinline__ double block_sum_d(double v, Smem& sm) {
  v = warp_sum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) sm.red_d[warp] = v;
  __syncthreads();
  double t = 0.0;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) t += sm.red_d[w];
  __syncthreads();
  return t;
}

__device__ __forceinline__ unsigned long long block_sum_u(unsigned long long v, Smem& sm) {
  v = warp_sum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) sm.red_u[warp] = v;
  __syncthreads();
  unsigned long long t = 0;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) t += sm.red_u[w];
  __syncthreads();
  return t;
}

__device__ __forceinline__ unsigned long long warp_max_u(unsigned long long v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const unsigned long long other = __shfl_xor_sync(0xffffffffu, v, o);
    v = other > v ? other : v;
  }
  return v;
}

__device__ __forceinline__ unsigned long long block_max_u(unsigned long long v, Smem& sm) {
  v = warp_max_u(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) sm.red_u[warp] = v;
  __syncthreads();
  unsigned long long t = 0;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) t = sm.red_u[w] > t ? sm.red_u[w] : t;
  __syncthreads();
  return t;
}

// (value, id) maximum, lowest id on ties; returns the id.
__device__ __forceinline__ int32_t block_argmax(float v, int32_t id, Smem& sm, float* best_value) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int32_t oi = __shfl_xor_sync(0xffffffffu, id, o);
    if (ov > v || (ov == v && oi < id)) v = ov, id = oi;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) sm.red_f[warp] = v, sm.red_i[warp] = id;
  __syncthreads();
  float bv = sm.red_f[0];
  int32_t bi = sm.red_i[0];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) {
    if (sm.red_f[w] > bv || (sm.red_f[w] == bv && sm.red_i[w] < bi))
      bv = sm.red_f[w], bi = sm.red_i[w];
  }
  __syncthreads();
  *best_value = bv;
  return bi;
}

// Softmax of logits / temperature, recomputed per element on every pass (the row does not fit in
// shared memory): p_i = float(double(exp(l_i / T - m)) / S).
struct Probs {
  RowLogits l;
  float temperature;
  float m;
  double sum;
  __device__ __forceinline__ float operator()(int64_t i) const {
    const float z = __fdiv_rn(l(i), temperature);
    const float e = expf(__fsub_rn(z, m));
    return __double2float_rn(static_cast<double>(e) / sum);
  }
};

__device__ __forceinline__ unsigned long long to_fixed(float p) {
  return __double2ull_rn(static_cast<double>(p) * kFixedScale);
}

// The kept set {i : p_i > p or (p_i == p and i <= id)}, or everything.
struct Cut {
  float p;
  int32_t id;
  bool all;
  __device__ __forceinline__ bool keeps(float pi, int32_t i) const {
    return all || pi > p || (pi == p && i <= id);
  }
};

// Among the tokens `filter` keeps, in order (p descending, id ascending), the cut that keeps
//   count mode: the first k tokens;
//   mass mode: the smallest prefix whose fixed-point mass reaches target (everything when none
//   does).
__device__ Cut select_cut(const Probs& probs, int64_t vocab, const Cut& filter, bool by_mass,
                          int64_t k, unsigned long long target, Smem& sm) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  uint32_t prefix = 0, mask = 0;
  int64_t count_before = 0;
  unsigned long long mass_before = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = tid; b < kCopies * 256; b += kThreads) {
      (&sm.cnt[0][0])[b] = 0;
      (&sm.mass[0][0])[b] = 0;
    }
    __syncthreads();
    const int copy = warp % kCopies;
    for (int64_t i = tid; i < vocab; i += kThreads) {
      const float p = probs(i);
      if (!filter.keeps(p, static_cast<int32_t>(i))) continue;
      const uint32_t bits = __float_as_uint(p);
      if ((bits & mask) != prefix) continue;
      const uint32_t d = (bits >> shift) & 255u;
      atomicAdd(&sm.cnt[copy][d], 1u);
      if (by_mass) atomicAdd(&sm.mass[copy][d], to_fixed(p));
    }
    __syncthreads();
    for (int d = tid; d < 256; d += kThreads) {
      for (int c = 1; c < kCopies; ++c) {
        sm.cnt[0][d] += sm.cnt[c][d];
        sm.mass[0][d] += sm.mass[c][d];
      }
    }
    __syncthreads();
    if (tid == 0) {
      int sel = -1;
      for (int d = 255; d >= 0; --d) {
        if (by_mass) {
          if (mass_before + sm.mass[0][d] >= target) {
            sel = d;
            break;
          }
          mass_before += sm.mass[0][d];
        } else if (count_before + sm.cnt[0][d] >= k) {
          sel = d;
          break;
        }
        count_before += sm.cnt[0][d];
      }
      sm.sel = sel;
      sm.count_before = count_before;
      sm.mass_before = mass_before;
    }
    __syncthreads();
    const int sel = sm.sel;
    count_before = sm.count_before;
    mass_before = sm.mass_before;
    if (sel < 0) return filter;  // block-uniform
    prefix |= static_cast<uint32_t>(sel) << shift;
    mask |= 255u << shift;
  }
  // Ties at the cut value: walk them in id order.
  const float p_star = __uint_as_float(prefix);
  const unsigned long long p_fixed = to_fixed(p_star);
  if (tid == 0) sm.found = -1;
  __syncthreads();
  for (int64_t base = 0; base < vocab; base += kThreads) {
    const int64_t i = base + tid;
    bool flag = false;
    if (i < vocab) {
      const float p = probs(i);
      flag = filter.keeps(p, static_cast<int32_t>(i)) && p == p_star;
    }
    const unsigned ballot = __ballot_sync(0xffffffffu, flag);
    if (lane == 0) sm.warp_counts[warp] = __popc(ballot);
    __syncthreads();
    int offset = 0, total = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      if (w < warp) offset += sm.warp_counts[w];
      total += sm.warp_counts[w];
    }
    if (flag) {
      const int64_t rank = offset + __popc(ballot & ((1u << lane) - 1u));
      bool hit, prev_hit;
      if (by_mass) {
        hit = mass_before + static_cast<unsigned long long>(rank + 1) * p_fixed >= target;
        prev_hit =
            rank > 0 && mass_before + static_cast<unsigned long long>(rank) * p_fixed >= target;
      } else {
        hit = count_before + rank + 1 >= k;
        prev_hit = count_before + rank >= k;
      }
      if (hit && !prev_hit) sm.found = static_cast<int32_t>(i);
    }
    __syncthreads();
    const int32_t found = sm.found;
    count_before += total;
    mass_before += static_cast<unsigned long long>(total) * p_fixed;
    __syncthreads();
    if (found >= 0) return Cut{p_star, found, false};
  }
  return Cut{p_star, static_cast<int32_t>(vocab), false};
}

// Keeps (bv, bi) the larger of itself and (v, i): value descending, lowest id on ties; NaN counts
// as -inf.
__device__ __forceinline__ void consider_max(float v, int64_t i, float* bv, int32_t* bi) {
  v = isnan(v) ? -INFINITY : v;
  if (v > *bv || (v == *bv && i < *bi)) *bv = v, *bi = static_cast<int32_t>(i);
}

// This thread's share of the maximum and argmax over a row of nv float4s (the block's threads
// stride through it), kScanVecs loads in flight; with kMasked, tokens whose bit in `mask` is clear
// count as -inf (tokens 4v..4v+3 are bits 4(v % 8).. of word v / 8).
template <bool kMasked>
__device__ __forceinline__ void scan_max(const float4* __restrict__ l4, int64_t nv,
                                         const uint32_t* __restrict__ mask, float* bv,
                                         int32_t* bi) {
  for (int64_t v0 = threadIdx.x; v0 < nv; v0 += kThreads * kScanVecs) {
    float4 q[kScanVecs];
    uint32_t bits[kScanVecs];
#pragma unroll
    for (int j = 0; j < kScanVecs; ++j) {
      const int64_t v = v0 + static_cast<int64_t>(j) * kThreads;
      if (v < nv) {
        q[j] = l4[v];
        if constexpr (kMasked) bits[j] = mask[v >> 3] >> ((v & 7) * 4);
      }
    }
#pragma unroll
    for (int j = 0; j < kScanVecs; ++j) {
      const int64_t v = v0 + static_cast<int64_t>(j) * kThreads;
      if (v >= nv) break;
      if constexpr (kMasked) {
        const uint32_t b = bits[j];
        consider_max(b & 1u ? q[j].x : -INFINITY, 4 * v, bv, bi);
        consider_max(b & 2u ? q[j].y : -INFINITY, 4 * v + 1, bv, bi);
        consider_max(b & 4u ? q[j].z : -INFINITY, 4 * v + 2, bv, bi);
        consider_max(b & 8u ? q[j].w : -INFINITY, 4 * v + 3, bv, bi);
      } else {
        consider_max(q[j].x, 4 * v, bv, bi);
        consider_max(q[j].y, 4 * v + 1, bv, bi);
        consider_max(q[j].z, 4 * v + 2, bv, bi);
        consider_max(q[j].w, 4 * v + 3, bv, bi);
      }
    }
  }
}

__global__ void __launch_bounds__(kThreads) sample_tokens_kernel(
    const float* __restrict__ logits, int64_t vocab, const DeviceSamplingRow* __restrict__ rows,
    const uint32_t* __restrict__ step_words, const uint32_t* __restrict__ cache_words,
    DeviceSampledToken* __restrict__ out, DeviceTokenLogprob* __restrict__ top) {
  __shared__ Smem sm;
  const DeviceSamplingRow r = rows[blockIdx.x];
  const float* l = logits + static_cast<int64_t>(r.logits_row) * vocab;
  const uint32_t* words = r.mask_in_cache ? cache_words : step_words;
  // Block-uniform: every branch on `mask` below is taken alike by all threads.
  const uint32_t* mask = r.mask_begin >= 0 && words != nullptr ? words + r.mask_begin : nullptr;
  const RowLogits logit{l, mask};
  const int tid = threadIdx.x;

  // Maximum and argmax of the (penalized) logits. The only pass a greedy row makes: with 16-byte
  // loads, kScanVecs of them in flight per thread (one block reads the row alone; a scalar loop
  // keeps one load in flight and dominated the greedy decode step's sampler time).
  float bv = -INFINITY;
  int32_t bi = 0x7fffffff;
  if (vocab % 4 == 0 && reinterpret_cast<uintptr_t>(l) % 16 == 0) {
    // A row without a mask takes the loop without the mask's loads and selects.
    if (mask == nullptr)
      scan_max<false>(reinterpret_cast<const float4*>(l), vocab / 4, nullptr, &bv, &bi);
    else
      scan_max<true>(reinterpret_cast<const float4*>(l), vocab / 4, mask, &bv, &bi);
  } else {
    for (int64_t i = tid; i < vocab; i += kThreads) consider_max(logit(i), i, &bv, &bi);
  }
  float max_logit;
  const int32_t argmax = block_argmax(bv, bi, sm, &max_logit);

  int32_t token = 0;
  if (max_logit == -INFINITY) {
    token = 0;
  } else if (r.temperature < 1e-5f) {
    token = argmax;
  } else {
    Probs probs{logit, r.temperature, __fdiv_rn(max_logit, r.temperature), 0.0};
    double s = 0.0;
    for (int64_t i = tid; i < vocab; i += kThreads)
      s += static_cast<double>(expf(__fsub_rn(__fdiv_rn(logit(i), r.temperature), probs.m)));
    probs.sum = block_sum_d(s, sm);
    const float p_max = __double2float_rn(1.0 / probs.sum);  // exp(0) = 1 is the largest e

    Cut cut{0.f, 0, true};
    if (r.top_k > 0 && r.top_k < vocab) cut = select_cut(probs, vocab, cut, false, r.top_k, 0, sm);
    if (r.top_p < 1.0f) {
      unsigned long long kept = 0;
      for (int64_t i = tid; i < vocab; i += kThreads) {
        const float p = probs(i);
        if (cut.keeps(p, static_cast<int32_t>(i))) kept += to_fixed(p);
      }
      kept = block_sum_u(kept, sm);
      const unsigned long long target =
          __double2ull_rn(static_cast<double>(r.top_p) * static_cast<double>(kept));
      cut = select_cut(probs, vocab, cut, true, 0, target, sm);
    }
    const float threshold = r.min_p > 0.f ? __fmul_rn(r.min_p, p_max) : 0.f;

    // The exponential race over the kept tokens; the argmax of p as the fallback.
    float best_key = -1.f, best_p = -1.f;
    int32_t best = 0x7fffffff, best_p_id = 0x7fffffff;
    for (int64_t i = tid; i < vocab; i += kThreads) {
      const float p = probs(i);
      const int32_t id = static_cast<int32_t>(i);
      if (p > best_p) best_p = p, best_p_id = id;
      if (!cut.keeps(p, id) || !(p > 0.f) || p < threshold) continue;
      const float e = -logf(philox_uniform(r.seed, r.step, static_cast<uint32_t>(id)));
      const float key = e > 0.f ? __fdiv_rn(p, e) : INFINITY;
      if (key > best_key || (key == best_key && id < best)) best_key = key, best = id;
    }
    float race_key, fallback_p;
    const int32_t winner = block_argmax(best_key, best, sm, &race_key);
    const int32_t fallback = block_argmax(best_p, best_p_id, sm, &fallback_p);
    token = race_key >= 0.f ? winner : fallback;
  }

  if (tid == 0) out[blockIdx.x].token = token;
  if (r.num_logprobs < 0) {
    if (tid == 0) out[blockIdx.x].logprob = 0.f;
    return;
  }
  double s = 0.0;
  if (max_logit != -INFINITY)
    for (int64_t i = tid; i < vocab; i += kThreads)
      s += exp(static_cast<double>(__fsub_rn(logit(i), max_logit)));
  s = block_sum_d(s, sm);
  const float log_sum = max_logit == -INFINITY ? 0.f : static_cast<float>(log(s));
  auto logprob = [&](int32_t i) {
    return max_logit == -INFINITY ? -INFINITY : __fsub_rn(__fsub_rn(logit(i), max_logit), log_sum);
  };
  if (tid == 0) out[blockIdx.x].logprob = logprob(token);
  const int64_t n = min(static_cast<int64_t>(min(r.num_logprobs, kMaxTopLogprobs)), vocab);
  unsigned long long prev = ~0ull;
  for (int64_t j = 0; j < n; ++j) {
    unsigned long long best = 0;
    for (int64_t i = tid; i < vocab; i += kThreads) {
      const unsigned long long key = order_key(logit(i), static_cast<int32_t>(i));
      if (key < prev && key > best) best = key;
    }
    best = block_max_u(best, sm);
    prev = best;
    if (tid == 0) {
      const int32_t id = key_id(best);
      top[static_cast<int64_t>(blockIdx.x) * kMaxTopLogprobs + j] =
          DeviceTokenLogprob{id, logprob(id)};
    }
  }
}

}  // namespace

Status sample_tokens(const float* logits, int64_t vocab, const DeviceSamplingRow* rows,
                     int32_t num_rows, DeviceSampledToken* out, DeviceTokenLogprob* top,
                     cudaStream_t stream, const uint32_t* step_words, const uint32_t* cache_words) {
  if (num_rows <= 0) return Status();
  if (vocab >= 0x7fffffff) return unsupported("sample_tokens: vocabulary too large");
  sample_tokens_kernel<<<num_rows, kThreads, 0, stream>>>(logits, vocab, rows, step_words,
                                                          cache_words, out, top);
  return check_launch("sample_tokens_kernel");
}

}  // namespace lathe::cuda
