// The device-side form of one sampled row (ModelInput's SamplingRow), packed by the runner into the
// step's input buffer; read by process_logits() and sample_tokens(). Plain data, 8-byte aligned.
#pragma once

#include <cstdint>

namespace lathe::cuda {

// Top logprobs the GPU sampler returns per row at most (OpenAI's API allows 20).
constexpr int kMaxTopLogprobs = 32;

struct DeviceSamplingRow {
  float temperature = 1.0f;
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  int32_t top_k = 0;
  int32_t num_logprobs = -1;
  uint64_t seed = 0;
  uint64_t step = 0;
  int32_t logits_row = 0;    // row of the logits matrix this sampled row reads
  int32_t banned_begin = 0;  // banned ids: banned[banned_begin, banned_end)
  int32_t banned_end = 0;
  int32_t history_begin = 0;       // history[history_begin, history_prompt_end) is the prompt,
  int32_t history_prompt_end = 0;  // [history_prompt_end, history_end) the output
  int32_t history_end = 0;
  int32_t bias_begin = 0;  // logit bias entries: biases[bias_begin, bias_end)
  int32_t bias_end = 0;
  // Allowed-token bitmask (constrained decoding): words[mask_begin, + ceil(V / 32)) of the step's
  // mask words (mask_in_cache 0) or of the device mask cache (1: mask_begin = slot * ceil(V / 32),
  // step_executor.h); mask_begin -1: none.
  int32_t mask_begin = -1;
  int32_t mask_in_cache = 0;
};
static_assert(sizeof(DeviceSamplingRow) == 88, "packed layout shared with the runner");

// One logit_bias entry of a row (ids unique within a row).
struct DeviceTokenBias {
  int32_t token = -1;
  float bias = 0.0f;
};

struct DeviceSampledToken {
  int32_t token = -1;
  float logprob = 0.0f;  // of the chosen token, when num_logprobs >= 0
};

struct DeviceTokenLogprob {
  int32_t token = -1;
  float logprob = 0.0f;
};

}  // namespace lathe::cuda
