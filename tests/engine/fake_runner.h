// A deterministic stand-in for a model, for unit tests of the scheduler, KV cache and engine core.
//
// Its "KV cache" stores the token id written to each slot. For each sampled sequence it reads the
// whole context back through the block table and derives the next token from it (a hash), so any
// paging mistake (a wrong slot, a wrong block table, a stale prefix-cache block, a recompute that
// skips a token) changes the output or fails the step with an error naming the problem.
// Within a step, every token is written before any context is read, as the ModelInput contract
// asks. Drafts are verified as a real runner does: each of a sequence's sampled rows reads the
// context up to its own position, and accept_draft_tokens() keeps what the model agrees with.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "engine/core/strings.h"
#include "engine/runtime/draft_acceptance.h"
#include "engine/runtime/model_runner.h"
#include "engine/runtime/next_decode_input.h"
#include "engine/runtime/token_constraint.h"

namespace lathe::test {

struct FakeRunnerOptions {
  int64_t vocab_size = 1000;    // ids 0..2 are never produced unless forced (0 pad, 1 bos, 2 eos)
  int64_t block_bytes = 4096;   // bytes per block reported to the KV planner
  int64_t kv_budget_bytes = 0;  // memory_info().kv_budget_bytes
  int32_t step_delay_ms = 0;    // sleep in each execute(), to hold requests mid-stream
  int32_t force_token_at = -1;  // output index at which every sequence produces force_token
  TokenId force_token = 2;
  int64_t fail_at_step = -1;    // execute() number (1-based) that returns an error
  int64_t throw_at_step = -1;   // execute() number (1-based) that throws std::bad_alloc
  bool verifies_drafts = true;  // verifies_draft_tokens()
};

class FakeModelRunner : public ModelRunner {
 public:
  explicit FakeModelRunner(FakeRunnerOptions options = {}) : options_(options) {
    info_.device_name = "fake";
    info_.kv_budget_bytes = options.kv_budget_bytes;
  }

  const DeviceMemoryInfo& memory_info() const override { return info_; }
  int64_t kv_block_bytes(int32_t) const override { return options_.block_bytes; }
  Status allocate_kv_cache(int32_t num_blocks, int32_t block_size) override {
    block_size_ = block_size;
    slots_.assign(static_cast<size_t>(num_blocks) * block_size, -1);
    return Status::ok();
  }
  int64_t vocab_size() const override { return options_.vocab_size; }
  bool verifies_draft_tokens() const override { return options_.verifies_drafts; }

  Result<ModelOutput> execute(const ModelInput& in) override {
    struct Running {
      std::atomic<bool>& flag;
      ~Running() { flag = false; }  // also when the step throws
    } running{in_execute_};
    in_execute_ = true;
    return execute_step(in);
  }
  // Whether execute() is running (for tests that check what the engine leaves to the runner).
  bool in_execute() const { return in_execute_; }

  Result<ModelOutput> execute_step(const ModelInput& in) {
    ++num_steps_;
    if (options_.step_delay_ms > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(options_.step_delay_ms));
    if (num_steps_ == options_.fail_at_step) return internal_error("fake runner: injected failure");
    if (num_steps_ == options_.throw_at_step) throw std::bad_alloc();
    // Lookahead bookkeeping, as a GPU runner would: was this step the one predicted after the
    // previous step (ModelInput::next_step_continues, next_decode_input.h)? A hit runs the
    // predicted step, as the CUDA runner does: its forward pass and sampling rows as predicted, or,
    // when it has constrained rows, the predicted forward pass with this input's (late-bound)
    // sampling rows.
    std::optional<ModelInput> predicted;
    if (expected_) {
      const bool late = has_constrained_rows(*expected_);
      if (late ? same_forward(in, *expected_) : same_step(in, *expected_)) {
        ++lookahead_hits_;
        predicted = std::move(expected_);
        if (late) predicted->sampling = in.sampling;
      } else {
        ++lookahead_misses_;
      }
      expected_.reset();
    }
    const ModelInput& run = predicted ? *predicted : in;
    continues_.push_back(in.next_step_continues);
    ModelOutput out;
    LATHE_RETURN_IF_ERROR(sample_rows(run, &out));
    LATHE_RETURN_IF_ERROR(accept_draft_tokens(run, &out));
    tokens_computed_ += in.num_tokens();
    if (in.next_step_continues) {
      expected_ = predict_next_decode(in, block_size_);
      if (expected_)
        for (size_t k = 0; k < out.tokens.size(); ++k)
          expected_->token_ids[k] = out.tokens[k].token;
    }
    return out;
  }

  // One-hot rows at the token each sampled row would produce.
  Result<std::vector<float>> compute_logits(const ModelInput& in) override {
    ++num_steps_;
    ModelOutput out;
    LATHE_RETURN_IF_ERROR(sample_rows(in, &out));
    std::vector<float> logits(out.tokens.size() * static_cast<size_t>(options_.vocab_size), 0.f);
    for (size_t k = 0; k < out.tokens.size(); ++k)
      logits[k * options_.vocab_size + out.tokens[k].token] = 1.f;
    return logits;
  }

  // The token a context produces (greedy), for tests that predict outputs.
  TokenId greedy_next(std::span<const TokenId> context) const {
    return static_cast<TokenId>(3 + hash(context, 0, 0) %
                                        static_cast<uint64_t>(options_.vocab_size - 3));
  }
  // The token a context produces with `row`'s sampling (greedy or seeded; forced, banned and
  // masked tokens as options and row say).
  TokenId next_token(std::span<const TokenId> ctx, const SamplingRow& row) const {
    TokenId t;
    if (options_.force_token_at >= 0 &&
        row.step == static_cast<uint64_t>(options_.force_token_at)) {
      t = options_.force_token;
    } else if (row.is_greedy()) {
      t = greedy_next(ctx);
    } else {
      t = static_cast<TokenId>(3 + hash(ctx, row.seed, row.step) %
                                       static_cast<uint64_t>(options_.vocab_size - 3));
    }
    // Banned tokens (min_tokens) and tokens outside the row's mask (constrained decoding): take
    // the next id that is neither (the first one tried when none is).
    // The mask, looked up here when the engine left it to the runner (row_mask()).
    const std::shared_ptr<const TokenMask> mask = row_mask(row);
    const auto ok = [&row, &mask](TokenId id) {
      if (std::find(row.banned_tokens.begin(), row.banned_tokens.end(), id) !=
          row.banned_tokens.end())
        return false;
      if (!mask) return true;
      const size_t w = static_cast<size_t>(id) >> 5;
      return w < mask->size() && (((*mask)[w] >> (id & 31)) & 1u) != 0;
    };
    for (int64_t i = 0; i < options_.vocab_size && !ok(t); ++i)
      t = static_cast<TokenId>((t + 1) % options_.vocab_size);
    return t;
  }

  int64_t num_steps() const { return num_steps_; }
  int64_t tokens_computed() const { return tokens_computed_; }
  int64_t rows_sampled() const { return rows_sampled_; }  // logits rows sampled (drafts too)
  std::vector<int32_t> step_sizes() const { return step_sizes_; }  // sequences per step
  std::vector<bool> continues() const { return continues_; }       // next_step_continues per step
  // Steps that were (hits) or were not (misses) the step predicted after a next_step_continues one.
  int64_t lookahead_hits() const { return lookahead_hits_; }
  int64_t lookahead_misses() const { return lookahead_misses_; }

 private:
  std::atomic<bool> in_execute_{false};
  static uint64_t hash(std::span<const TokenId> ctx, uint64_t seed, uint64_t step) {
    uint64_t h = 1469598103934665603ull ^ (seed * 0x9e3779b97f4a7c15ull) ^ (step << 17);
    for (TokenId t : ctx) h = (h ^ static_cast<uint32_t>(t)) * 1099511628211ull;
    return h ^ (h >> 29);
  }

  // Writes the step's tokens, then samples every sampled row: row j of a sequence sampling c rows
  // reads its context up to its (c - 1 - j)-th token from the end.
  Status sample_rows(const ModelInput& in, ModelOutput* out) {
    LATHE_RETURN_IF_ERROR(check_and_write(in));
    size_t row = 0;
    for (size_t k = 0; k < in.sample_seqs.size(); ++k) {
      const int32_t s = in.sample_seqs[k];
      const int32_t c = in.sample_count(k);
      if (c < 1 || c > in.query_start[s + 1] - in.query_start[s])
        return internal_error(strformat("fake runner: sequence %d samples %d rows", s, c));
      std::vector<TokenId> context;
      LATHE_RETURN_IF_ERROR(read_context(in, s, &context));
      for (int32_t j = 0; j < c; ++j, ++row) {
        const std::span<const TokenId> prefix(context.data(), context.size() - (c - 1 - j));
        out->tokens.push_back({next_token(prefix, in.sampling[row]), 0.0f, {}});
      }
    }
    rows_sampled_ += static_cast<int64_t>(row);
    return Status::ok();
  }

  Status check_and_write(const ModelInput& in) {
    const int32_t S = in.num_seqs();
    if (static_cast<int32_t>(in.query_start.size()) != S + 1 ||
        in.query_start[S] != in.num_tokens() || in.positions.size() != in.token_ids.size() ||
        in.slot_mapping.size() != in.token_ids.size() ||
        in.block_tables.size() != static_cast<size_t>(S) * in.max_blocks_per_seq ||
        static_cast<int32_t>(in.sampling.size()) != in.num_sample_rows() ||
        (!in.sample_counts.empty() && in.sample_counts.size() != in.sample_seqs.size()))
      return internal_error("fake runner: inconsistent ModelInput sizes");
    step_sizes_.push_back(S);
    for (int32_t s = 0; s < S; ++s) {
      const int32_t q = in.query_start[s + 1] - in.query_start[s];
      for (int32_t j = 0; j < q; ++j) {
        const int32_t t = in.query_start[s] + j;
        if (in.positions[t] != in.seq_lens[s] - q + j)
          return internal_error(strformat("fake runner: token %d has position %d, expected %d", t,
                                          in.positions[t], in.seq_lens[s] - q + j));
        const int64_t block = in.block_tables[static_cast<size_t>(s) * in.max_blocks_per_seq +
                                              in.positions[t] / block_size_];
        const int64_t slot = block * block_size_ + in.positions[t] % block_size_;
        if (in.slot_mapping[t] != slot || slot < 0 || slot >= static_cast<int64_t>(slots_.size()))
          return internal_error(
              strformat("fake runner: token %d maps to slot %lld, block table says %lld", t,
                        static_cast<long long>(in.slot_mapping[t]), static_cast<long long>(slot)));
      }
    }
    for (int32_t t = 0; t < in.num_tokens(); ++t) slots_[in.slot_mapping[t]] = in.token_ids[t];
    return Status::ok();
  }

  Status read_context(const ModelInput& in, int32_t s, std::vector<TokenId>* ctx) const {
    for (int32_t p = 0; p < in.seq_lens[s]; ++p) {
      const int64_t block =
          in.block_tables[static_cast<size_t>(s) * in.max_blocks_per_seq + p / block_size_];
      const TokenId v = slots_[static_cast<size_t>(block * block_size_ + p % block_size_)];
      if (v < 0)
        return internal_error(
            strformat("fake runner: sequence %d reads unwritten position %d", s, p));
      ctx->push_back(v);
    }
    return Status::ok();
  }

  FakeRunnerOptions options_;
  DeviceMemoryInfo info_;
  int32_t block_size_ = 16;
  std::vector<TokenId> slots_;
  std::atomic<int64_t> num_steps_{0};
  int64_t tokens_computed_ = 0;
  int64_t rows_sampled_ = 0;
  std::vector<int32_t> step_sizes_;
  std::vector<bool> continues_;
  std::optional<ModelInput> expected_;
  int64_t lookahead_hits_ = 0, lookahead_misses_ = 0;
};

}  // namespace lathe::test
