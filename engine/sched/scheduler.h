// The scheduler: iteration-level (continuous) batching of sequences over a paged KV cache, or
// static batching for comparison. No backend code; unit-tested with a fake model runner.
//
// Each schedule() call forms one step under two caps: max_num_batched_tokens tokens and
// max_num_seqs sequences. Order of service:
//   1. Running sequences, oldest first, each getting min(its uncomputed tokens, the budget left).
//      A prompt longer than the budget is split into chunks over several steps (chunked prefill)
//      and runs alongside the decodes. First come, first served keeps every running sequence older
//      than every waiting one, so at most one running sequence is mid-prefill and it is the newest:
//      the decodes before it always get their token (max_num_batched_tokens >= max_num_seqs), and a
//      long prefill never starves them.
//   2. When a running sequence needs a block and none is free, the newest running sequence is
//      preempted: its blocks are freed and it goes back to the waiting queue, to be recomputed
//      (prompt ++ output so far) when it is admitted again. The oldest sequence always progresses.
//   3. Waiting sequences, first come first served, while slots, budget and blocks allow (not in a
//      step that preempted). Admission looks the prompt up in the prefix cache first: cached blocks
//      are shared and their tokens count as computed.
// Static batching: a batch of up to max_num_seqs waiting sequences is chosen when nothing runs,
// and no other sequence is admitted until every member has finished.
// Draft tokens (speculative decoding): a decoding sequence with proposed drafts computes 1 + k
// tokens, k no more than its drafts and the budget left after one token for every running sequence
// after it, and only when the blocks for them are free: drafts are dropped rather than starve or
// preempt anyone. append_tokens() then rolls back the rejected ones and frees the blocks wholly
// past the kept tokens. Prefix-cache publication only ever covers verified tokens.
//
// Single-threaded: the engine core's thread owns it.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/kv/kv_cache_manager.h"
#include "engine/runtime/engine_config.h"
#include "engine/sched/scheduler_output.h"
#include "engine/sched/sequence.h"

namespace lathe {

// Resolved limits (no "0 = default" here; the engine resolves those).
struct SchedulerLimits {
  int32_t max_num_seqs = 64;             // sequences per step
  int32_t max_num_batched_tokens = 512;  // tokens per step; >= max_num_seqs
  SchedulingPolicy policy = SchedulingPolicy::kContinuous;
  bool enable_chunked_prefill = true;  // off: a prompt is computed in one step (needs the budget)
};

class Scheduler {
 public:
  // `kv` must outlive the scheduler.
  Scheduler(const SchedulerLimits& limits, KvCacheManager* kv);

  // Queues a sequence (status waiting, nothing computed). Its id must be new.
  void add(std::unique_ptr<Sequence> seq);

  // Forms the next step; updates num_computed_tokens and block tables accordingly. Empty when
  // nothing can run.
  SchedulerOutput schedule();

  // Proposes drafts to follow a running sequence's tokens in its next step, replacing any earlier
  // proposal; ignored unless the sequence is decoding (one uncomputed token). The caller keeps
  // them within the sequence's limits (max_tokens, max-model-len).
  void set_draft_tokens(RequestId id, std::span<const TokenId> drafts);

  // Appends a sampled token to a sequence scheduled with sample = true.
  void append_token(RequestId id, TokenId token);
  // Appends what a step produced for a sequence scheduled with sample = true: one token, or with k
  // drafts the accepted drafts (at most k) and one token more. num_computed_tokens rolls back by
  // the rejected drafts, whose blocks wholly past the sequence's tokens are freed.
  void append_tokens(RequestId id, std::span<const TokenId> tokens);

  // Removes a sequence (finished, aborted or failed) from the waiting or running set and frees its
  // blocks. Returns false for unknown ids.
  bool finish(RequestId id);

  const Sequence* find(RequestId id) const;
  // Running sequences, oldest first (the order schedule() serves them).
  const std::vector<Sequence*>& running() const { return running_; }
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  bool has_unfinished() const { return !seqs_.empty(); }
  std::vector<RequestId> unfinished_ids() const;  // running, then waiting
  int64_t num_preemptions() const { return num_preemptions_; }
  const SchedulerLimits& limits() const { return limits_; }

 private:
  void schedule_running(SchedulerOutput& out, int32_t& budget);
  void schedule_waiting(SchedulerOutput& out, int32_t& budget);
  // Drafts `seq` may carry in this step (0 when it does not decode, or budget or blocks lack);
  // allocates their blocks.
  int32_t schedulable_drafts(Sequence& seq, int32_t budget, int32_t num_later);
  void add_scheduled(SchedulerOutput& out, Sequence& seq, int32_t num_new, int32_t num_drafts);
  // After a step's tokens are appended: rolls back the rejected drafts (append_tokens()).
  void resolve_drafts(Sequence& seq, int32_t num_appended);
  void preempt(Sequence& seq, SchedulerOutput& out);
  void insert_running(Sequence* seq);
  void insert_waiting(Sequence* seq);
  bool may_admit(const Sequence& seq) const;

  SchedulerLimits limits_;
  KvCacheManager* kv_;
  std::unordered_map<RequestId, std::unique_ptr<Sequence>> seqs_;
  std::vector<Sequence*> running_;              // ordered by arrival_index
  std::deque<Sequence*> waiting_;               // ordered by arrival_index
  std::unordered_set<RequestId> static_batch_;  // static policy: members of the current batch
  uint64_t next_arrival_ = 0;
  int64_t num_preemptions_ = 0;
};

}  // namespace lathe
