// Packing one step's ModelInput into a single buffer that crosses to the GPU with one asynchronous
// copy. The same layout is used in page-locked host memory and in device memory.
//
// Layout for a step of (up to) T tokens, S sequences and R >= S row slots, each array 16-byte
// aligned:
//   token_ids [T] i32 | positions [T] i32 | slot_mapping [T] i64 | query_start [S+1] i32 |
//   seq_lens [S] i32 | kv_indptr [S+1] i32 | kv_last_page_len [S] i32 | lm_rows [R] i32 |
//   sampling [R] DeviceSamplingRow | kv_indices [...] i32 | banned [...] i32 | history [...] i32 |
//   biases [...] DeviceTokenBias | mask words [rows with a mask x ceil(V / 32)] u32
// R is S except for a step whose sampled rows outnumber its sequences (drafts to verify: R = the
// sampled rows). The offsets depend only on (T, S, R), so a CUDA graph captured for a decode bucket
// of B sequences (T = S = R = B) reads its inputs from fixed addresses on every replay. Only the
// used prefix is copied.
//
// Decode buckets are padded to B: padding sequence b has one token (id 0, position 0, slot -1: no
// KV write), seq_len 0 and no pages, so attention gives it zeros; its logits row is never sampled.
// lm_rows are the hidden-state rows that reach the LM head: the trailing sample_count(i) tokens of
// each sampled sequence, in order (eager: its last token, or with drafts its last verified token
// and the drafts), or every row of the bucket (graph; a decode step's rows are its sequences, one
// token each: steps with drafts run eagerly). Each sampling row points at its logits row. Rows of
// one sequence with penalties share one history: row j's is row j-1's plus the next draft, so it
// adds one token, not a copy.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/backend/cuda/sampling_rows.h"
#include "engine/core/status.h"
#include "engine/runtime/model_io.h"

namespace lathe::cuda {

struct StepLayout {
  int64_t token_ids = 0, positions = 0, slot_mapping = 0, query_start = 0, seq_lens = 0,
          kv_indptr = 0, kv_last_page_len = 0, lm_rows = 0, sampling = 0, kv_indices = 0;
  int64_t fixed_bytes = 0;  // == kv_indices: where the variable part starts

  // max_rows < max_seqs (the default) means max_seqs.
  static StepLayout make(int64_t max_tokens, int64_t max_seqs, int64_t max_rows = 0);
};

// Typed views of one layout over a base address (host or device).
struct StepArrays {
  int32_t* token_ids = nullptr;
  int32_t* positions = nullptr;
  int64_t* slot_mapping = nullptr;
  int32_t* query_start = nullptr;
  int32_t* seq_lens = nullptr;
  int32_t* kv_indptr = nullptr;
  int32_t* kv_last_page_len = nullptr;
  int32_t* lm_rows = nullptr;
  DeviceSamplingRow* sampling = nullptr;
  int32_t* kv_indices = nullptr;

  static StepArrays at(void* base, const StepLayout& layout);
};

// Limits the runner was planned for; pack() refuses steps outside them.
struct StepLimits {
  int32_t max_tokens = 0;
  int32_t max_seqs = 0;
  int32_t block_size = 16;
  int32_t num_blocks = 0;  // KV blocks allocated
  int64_t max_pages = 0;   // capacity of kv_indices
  int64_t vocab_size = 0;
  int32_t max_logprobs = kMaxTopLogprobs;
  // Sampled rows (logits rows) per step the runner holds room for; 0 means max_seqs (one row per
  // sequence: no drafts).
  int32_t max_sample_rows = 0;
};

// What pack() produced, beyond the bytes.
struct PackedStep {
  StepLayout layout;
  int32_t num_tokens = 0;   // padded (graph) or real
  int32_t num_seqs = 0;     // padded (graph) or real
  int32_t num_lm_rows = 0;  // rows of logits computed
  int32_t num_samples = 0;  // sampled rows (ModelInput::num_sample_rows())
  int64_t num_pages = 0;
  int64_t banned_offset = 0;      // bytes from the base: banned ids
  int64_t history_offset = 0;     // bytes from the base: history tokens
  int64_t bias_offset = 0;        // bytes from the base: DeviceTokenBias entries
  int64_t mask_offset = 0;        // bytes from the base: allowed-token bitmask words
  int64_t bytes = 0;              // bytes to copy
  bool needs_processing = false;  // some row has banned tokens, penalties or a bias
  bool has_masks = false;         // some row has an allowed-token mask (packed or in the cache)
  bool needs_logprobs = false;
};

// Whether pack_step() writes the rows' allowed-token masks (constrained decoding) now, or leaves
// them for later: kLater packs every row without one (mask_begin -1, no mask words), for a step
// whose forward pass is launched before its sampling rows are final; the step is packed again
// with kNow (the same layout up to the tails) before it samples (step_executor.h, late-bound
// sampling rows).
enum class MaskPacking { kNow, kLater };

// With MaskPacking::kNow, where each sampled row's mask comes from: mask_slots[i] >= 0, slot k of
// the device mask cache (mask_begin = k * ceil(V / 32), mask_in_cache 1; no words packed);
// -1 (or an empty span), its words packed with the step, looked up with row_mask() when the
// engine left that to the runner.
using MaskSlots = std::span<const int32_t>;

// check_step: `in` against `limits`: the planned step sizes (tokens, sequences, sampled rows), then
// check_model_input()
// (model_input_check.h: ids in range, slots and pages inside the cache, monotonic query_start,
// positions matching seq_lens). pack_step: writes `in` to `host` (host_capacity bytes; the caller
// grows it first with step_bytes()). pad_to > num_seqs pads a decode step to a graph bucket, each
// padding sequence with pad_query_len tokens. graph_rows: a graph computes logits for every row of
// its bucket; with pad_query_len 1 that is one row per sequence (steps with drafts are refused),
// with pad_query_len q > 1 every token row of a step whose sequences each carry q tokens, all
// sampled (a token and its q - 1 drafts). `device_capacity` bounds the bytes. `masks`: see
// MaskPacking; `mask_slots`: MaskSlots.
Status check_step(const ModelInput& in, const StepLimits& limits);
Status pack_step(const ModelInput& in, const StepLimits& limits, int32_t pad_to, bool graph_rows,
                 uint8_t* host, int64_t host_capacity, int64_t device_capacity, PackedStep* out,
                 int32_t pad_query_len = 1, MaskPacking masks = MaskPacking::kNow,
                 MaskSlots mask_slots = {});

// Bytes pack_step() needs for `in` (to grow the host buffer first).
int64_t step_bytes(const ModelInput& in, const StepLimits& limits, int32_t pad_to,
                   int32_t pad_query_len = 1, MaskPacking masks = MaskPacking::kNow,
                   MaskSlots mask_slots = {});

}  // namespace lathe::cuda
