#include "engine/backend/cuda/cuda_common.h"
#include "engine/backend/cuda/process_logits.h"

namespace lathe::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int32_t kSeenBit = 0x40000000;
constexpr int32_t kCountMask = kSeenBit - 1;

__global__ void __launch_bounds__(kThreads) process_logits_kernel(
    float* __restrict__ logits, int64_t vocab, const DeviceSamplingRow* __restrict__ rows,
    const int32_t* __restrict__ banned, const int32_t* __restrict__ history,
    const DeviceTokenBias* __restrict__ biases, const uint32_t* __restrict__ step_words,
    const uint32_t* __restrict__ cache_words, bool apply_masks, int32_t* __restrict__ counts) {
  const DeviceSamplingRow r = rows[blockIdx.x];
  const bool repetition = r.repetition_penalty != 1.0f;
  const bool counted = r.frequency_penalty != 0.0f || r.presence_penalty != 0.0f;
  const bool masked = apply_masks && r.mask_begin >= 0;
  if (r.banned_end <= r.banned_begin && r.bias_end <= r.bias_begin && !masked && !repetition &&
      !counted)
    return;
  float* l = logits + static_cast<int64_t>(r.logits_row) * vocab;
  int32_t* cnt = counts + static_cast<int64_t>(blockIdx.x) * vocab;

  for (int32_t i = r.banned_begin + threadIdx.x; i < r.banned_end; i += kThreads) {
    const int32_t t = banned[i];
    if (t >= 0 && t < vocab) l[t] = -INFINITY;
  }
  __syncthreads();
  for (int32_t i = r.bias_begin + threadIdx.x; i < r.bias_end; i += kThreads) {
    const DeviceTokenBias b = biases[i];
    if (b.token >= 0 && b.token < vocab) l[b.token] = __fadd_rn(l[b.token], b.bias);
  }
  __syncthreads();
  if (masked) {
    const uint32_t* words = (r.mask_in_cache ? cache_words : step_words) + r.mask_begin;
    for (int64_t t = threadIdx.x; t < vocab; t += kThreads)
      if (((words[t >> 5] >> (t & 31)) & 1u) == 0) l[t] = -INFINITY;
  }
  __syncthreads();
  if (!repetition && !counted) return;

  // Repetition: the first thread to set a token's seen bit applies the penalty, once per token.
  // Counting: occurrences in the output part, in the low bits.
  if (repetition) {
    for (int32_t i = r.history_begin + threadIdx.x; i < r.history_end; i += kThreads) {
      const int32_t t = history[i];
      if (t < 0 || t >= vocab) continue;
      if ((atomicOr(&cnt[t], kSeenBit) & kSeenBit) == 0) {
        const float v = l[t];
        l[t] = v > 0.f ? __fdiv_rn(v, r.repetition_penalty) : __fmul_rn(v, r.repetition_penalty);
      }
    }
  }
  if (counted) {
    for (int32_t i = r.history_prompt_end + threadIdx.x; i < r.history_end; i += kThreads) {
      const int32_t t = history[i];
      if (t >= 0 && t < vocab) atomicAdd(&cnt[t], 1);
    }
  }
  __syncthreads();
  if (counted) {
    // The first thread to take a token's count (leaving the seen bit) applies it.
    for (int32_t i = r.history_prompt_end + threadIdx.x; i < r.history_end; i += kThreads) {
      const int32_t t = history[i];
      if (t < 0 || t >= vocab) continue;
      const int32_t c = atomicAnd(&cnt[t], kSeenBit) & kCountMask;
      if (c > 0) {
        const float pen =
            __fadd_rn(__fmul_rn(r.frequency_penalty, static_cast<float>(c)), r.presence_penalty);
        l[t] = __fsub_rn(l[t], pen);
      }
    }
  }
  __syncthreads();
  for (int32_t i = r.history_begin + threadIdx.x; i < r.history_end; i += kThreads) {
    const int32_t t = history[i];
    if (t >= 0 && t < vocab) cnt[t] = 0;
  }
}

}  // namespace

Status process_logits(float* logits, int64_t vocab, const DeviceSamplingRow* rows, int32_t num_rows,
                      const int32_t* banned, const int32_t* history, const DeviceTokenBias* biases,
                      const uint32_t* step_words, const uint32_t* cache_words, bool apply_masks,
                      int32_t* counts, cudaStream_t stream) {
  if (num_rows <= 0) return Status();
  process_logits_kernel<<<num_rows, kThreads, 0, stream>>>(
      logits, vocab, rows, banned, history, biases, step_words, cache_words, apply_masks, counts);
  return check_launch("process_logits_kernel");
}

}  // namespace lathe::cuda
