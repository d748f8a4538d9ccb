// The contract between the engine core and a backend's model runner for one step.
//
// The engine core flattens the scheduler's decision into ModelInput: all scheduled tokens of all
// sequences in one token-major array (T tokens, S sequences), their positions, the KV slot each
// token's K/V is written to, each sequence's block table, and which sequences are sampled this
// step. A sequence whose prefill chunk ends before its prompt does is computed but not sampled.
//
// Multi-token steps (speculative decoding): a sampled sequence may end with k proposed (draft)
// tokens after its last verified token. Its sample_counts entry is then 1 + k: the logits of its
// 1 + k trailing tokens are sampled, one SamplingRow each, and accept_draft_tokens()
// (draft_acceptance.h) keeps the drafts the model agrees with plus one token more. The K/V of
// rejected drafts are written but never read: the engine rolls the sequence back, and those
// positions are written again before any step reads them.
//
// KV slots: slot = block_id * block_size + offset_in_block. Attention for the token at position p
// of sequence s reads positions [0, p] through block_tables[s] (causal), which includes tokens
// computed in earlier steps (chunked prefill, prefix-cache hits) and the ones written this step.
//
// Within a layer, a backend writes the K/V of every token of the step before any attention of that
// layer reads: block tables of different sequences may share blocks, and a sequence may read
// blocks another sequence of the same step is writing (a request admitted in the same step as the
// one computing a shared prompt prefix gets it as a prefix-cache hit, as in vLLM).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace lathe {

class TokenConstraint;  // token_constraint.h

// A bias added to one token's logit (OpenAI's logit_bias: -100..100; -100 in effect bans it).
struct TokenBias {
  TokenId token = -1;
  float bias = 0.0f;
  bool operator==(const TokenBias&) const = default;
};

// Which tokens a row may sample (constrained decoding): bit t of word t / 32 set = token t
// allowed. At least ceil(V / 32) words; bits past V are ignored. Shared, never mutated once made.
using TokenMask = std::vector<uint32_t>;

// Sampling for one sampled sequence (a row of the logits). Mirrors SamplingParams, plus the state
// the sampler needs that lives with the sequence.
struct SamplingRow {
  float temperature = 1.0f;
  float top_p = 1.0f;
  int32_t top_k = 0;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  uint64_t seed = 0;  // per-request seed
  uint64_t step = 0;  // index of the token being sampled within the request's output (RNG counter)
  int32_t num_logprobs = -1;  // -1: none; 0: chosen only; k: chosen + top-k
  // Token ids masked out (logit = -inf) this step: EOS/stop ids while min_tokens is not reached.
  std::vector<TokenId> banned_tokens;
  // Per-row sparse logit bias (the request's logit_bias), applied after the bans.
  std::vector<TokenBias> logit_bias;
  // Constrained decoding: tokens outside the row's mask get -inf, after the bias. The mask is
  // `allowed` when set; else, when `constraint` is set, constraint->allowed(constraint_state,
  // constraint_end_ids), looked up only when a runner asks for it (row_mask(),
  // token_constraint.h): the engine leaves the lookup, a hash hit or on a miss a walk of the
  // vocabulary, to the runner, which does it once the step's forward pass is launched, so that it
  // overlaps the device's work. `constraint` and the span are the request's, valid until
  // execute() returns (not owned; copies of the row kept past the step must not resolve them).
  // Neither set: no constraint.
  std::shared_ptr<const TokenMask> allowed;
  TokenConstraint* constraint = nullptr;
  int32_t constraint_state = 0;
  std::span<const TokenId> constraint_end_ids;
  // Penalty history, only filled when a penalty is active: history_tokens = prompt ++ output,
  // history_prompt_len = prompt length (repetition penalty uses all; presence/frequency the
  // output).
  std::vector<TokenId> history_tokens;
  int32_t history_prompt_len = 0;

  bool is_greedy() const { return temperature < 1e-5f; }
  // Whether the row has a mask, computed (allowed) or still to look up (constraint).
  bool is_constrained() const { return allowed != nullptr || constraint != nullptr; }
  bool operator==(const SamplingRow& o) const {
    return temperature == o.temperature && top_p == o.top_p && top_k == o.top_k &&
           min_p == o.min_p && repetition_penalty == o.repetition_penalty &&
           presence_penalty == o.presence_penalty && frequency_penalty == o.frequency_penalty &&
           seed == o.seed && step == o.step && num_logprobs == o.num_logprobs &&
           banned_tokens == o.banned_tokens && logit_bias == o.logit_bias &&
           (allowed == o.allowed || (allowed && o.allowed && *allowed == *o.allowed)) &&
           constraint == o.constraint &&
           (constraint == nullptr ||
            (constraint_state == o.constraint_state &&
             std::equal(constraint_end_ids.begin(), constraint_end_ids.end(),
                        o.constraint_end_ids.begin(), o.constraint_end_ids.end()))) &&
           history_tokens == o.history_tokens && history_prompt_len == o.history_prompt_len;
  }
};

struct ModelInput {
  // Per token, T entries.
  std::vector<TokenId> token_ids;
  std::vector<int32_t> positions;     // position of each token in its sequence
  std::vector<int64_t> slot_mapping;  // KV slot to write this token's K/V to

  // Per sequence, S entries (query_start has S + 1).
  std::vector<int32_t> query_start;  // tokens of sequence s: [query_start[s], query_start[s+1])
  std::vector<int32_t> seq_lens;     // tokens in the KV cache of s after this step (context length)
  std::vector<int32_t> block_tables;  // S rows of max_blocks_per_seq block ids (unused entries: 0)
  int32_t max_blocks_per_seq = 0;
  int32_t max_seq_len = 0;    // max over seq_lens
  int32_t max_query_len = 0;  // max tokens of one sequence this step

  // Sampled sequences (ascending indices into [0, S)).
  std::vector<int32_t> sample_seqs;
  // Per sample_seqs entry: how many TRAILING tokens of that sequence in this step have their
  // logits sampled: 1, or 1 + k when its last k tokens are drafts to verify (1 <= count <= the
  // sequence's query length). Empty means 1 for every sampled sequence: steps without drafts
  // leave it empty (no per-step allocation on the hot decode path).
  std::vector<int32_t> sample_counts;
  // One row per sampled row: num_sample_rows() rows, sequence after sequence, positions ascending
  // within a sequence. Row j of a sequence samples the token that follows its trailing token j:
  // step = (the sequence's output count before this step) + j, banned tokens per min_tokens at that
  // output index, penalty history prompt ++ output ++ the first j drafts.
  std::vector<SamplingRow> sampling;

  // The engine's expectation that the next step decodes exactly these sequences, one token each:
  // a decode-only step, nothing waiting to be admitted, no sequence reaching max_tokens (or
  // min_tokens) with this step's token. A runner may then start that step before this one's tokens
  // reach the host (lookahead, next_decode_input.h); it checks the next input against its
  // prediction, so a wrong expectation (an EOS, a stop string, an abort, an arrival) costs a
  // discarded step, never a wrong result. Constrained rows (SamplingRow::is_constrained) continue
  // too: their next mask depends on this step's token, so a runner that looks ahead launches only
  // the next step's forward pass early and binds its sampling rows late, taking them from the real
  // next input (next_decode_input.h: has_constrained_rows, same_forward).
  bool next_step_continues = false;

  int32_t num_tokens() const { return static_cast<int32_t>(token_ids.size()); }
  int32_t num_seqs() const { return static_cast<int32_t>(seq_lens.size()); }
  // sample_counts[i], or 1 when sample_counts is empty.
  int32_t sample_count(size_t i) const { return sample_counts.empty() ? 1 : sample_counts[i]; }
  // Rows of logits sampled this step: the sum of the counts (sample_seqs.size() without drafts).
  int32_t num_sample_rows() const {
    if (sample_counts.empty()) return static_cast<int32_t>(sample_seqs.size());
    int32_t n = 0;
    for (int32_t c : sample_counts) n += c;
    return n;
  }
  // Whether some sampled sequence carries drafts (a count above 1).
  bool has_drafts() const {
    for (int32_t c : sample_counts)
      if (c != 1) return true;
    return false;
  }
};

struct TokenLogprob {
  TokenId token = -1;
  float logprob = 0.0f;
};

// A sampled token and its logprobs.
struct SampledToken {
  TokenId token = -1;
  float logprob = 0.0f;                    // of the chosen token (when requested, else 0)
  std::vector<TokenLogprob> top_logprobs;  // the k most likely, highest first (when requested)
};

// What a step produced. `tokens` is flat: the tokens each sampled sequence produced, sequence after
// sequence (sample_seqs order); num_tokens[i] of them (>= 1) belong to sample_seqs[i]. Empty
// num_tokens means one token per sampled sequence (every step without drafts).
struct ModelOutput {
  std::vector<SampledToken> tokens;
  std::vector<int32_t> num_tokens;

  int32_t num_tokens_of(size_t i) const { return num_tokens.empty() ? 1 : num_tokens[i]; }
};

}  // namespace lathe
