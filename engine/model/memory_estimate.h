// What a model costs in memory, for planning (lathe inspect, Lathe Studio's model card): weights at
// several precisions, the KV cache per token and for a context × batch, and a verdict against a
// memory budget. Plain structs and pure functions; all sizes in bytes.
#pragma once

#include <cstdint>
#include <string>

#include "engine/model/model_config.h"

namespace lathe {

struct MemoryEstimate {
  int64_t num_parameters = 0;
  int64_t weight_bytes_fp16 = 0;    // parameters x 16 / 8 (also bf16)
  int64_t weight_bytes_int8 = 0;    // parameters x 8 / 8
  int64_t weight_bytes_int4 = 0;    // parameters x 4 / 8 (scales and zeros not counted)
  int64_t weight_bytes_stored = 0;  // as stored in the model files; 0 when there are no weights
  // K and V of one token over all layers: 2 x layers x kv_heads x head_dim x bytes per element.
  int64_t kv_bytes_per_token_fp16 = 0;  // fp16 / bf16 cache (GPU planning)
  int64_t kv_bytes_per_token_fp32 = 0;  // fp32 cache (the CPU backend)
  int64_t max_model_len = 0;            // tokens per sequence the KV figures below assume
  int64_t num_sequences = 1;            // concurrent sequences (batch)
  int64_t kv_bytes_fp16 = 0;            // per token x max_model_len x num_sequences
  int64_t kv_bytes_fp32 = 0;
};

// max_model_len <= 0: the model's context length; num_sequences <= 0 counts as 1.
MemoryEstimate estimate_memory(const ModelConfig& config, int64_t stored_weight_bytes,
                               int64_t max_model_len, int64_t num_sequences);

enum class FitKind {
  kFits,                // weights + overhead + KV for every sequence at max_model_len fit
  kFitsFewerSequences,  // at least one sequence at max_model_len fits, but not all of them
  kDoesNotFit,          // not even one sequence at max_model_len (or not even the weights)
};
const char* fit_kind_name(FitKind kind);  // "fits", "fits_fewer_sequences", "does_not_fit"

struct FitRequest {
  int64_t budget_bytes = 0;        // memory the model may use
  int64_t weight_bytes = 0;        // weights as they will sit in that memory
  int64_t overhead_bytes = 0;      // activations, workspaces, runtime
  int64_t kv_bytes_per_token = 0;  // at the cache's element size
  int64_t max_model_len = 0;       // tokens per sequence
  int64_t num_sequences = 1;       // wanted concurrent sequences
  int64_t int4_weight_bytes = 0;   // when > 0, suggested if the weights alone do not fit
};

struct FitVerdict {
  FitKind kind = FitKind::kDoesNotFit;
  int64_t needed_bytes = 0;   // weights + overhead + KV for max_model_len x num_sequences
  int64_t max_sequences = 0;  // sequences of max_model_len that fit at once
  int64_t max_kv_tokens = 0;  // KV tokens that fit after weights and overhead
  // One line for the user, e.g. "fits: needs 1.2 GiB of 16.0 GiB", "fits 3 of 8 sequences of 8192
  // tokens; for all 8 use a max model length of at most 3072 tokens", "does not fit: ...; use ...".
  std::string message;
};

FitVerdict check_fit(const FitRequest& request);

// Physical memory of this machine (bytes); 0 when unknown.
int64_t system_memory_bytes();

}  // namespace lathe
