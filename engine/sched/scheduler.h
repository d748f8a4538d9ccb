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
//
// Single-threaded: the engine core's thread owns it.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
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

  // Appends a sampled token to a sequence scheduled with sample = true.
  void append_token(RequestId id, TokenId token);

  // Removes a sequence (finished, aborted or failed) from the waiting or running set and frees its
  // blocks. Returns false for unknown ids.
  bool finish(RequestId id);

  const Sequence* find(RequestId id) const;
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  bool has_unfinished() const { return !seqs_.empty(); }
  std::vector<RequestId> unfinished_ids() const;  // running, then waiting
  int64_t num_preemptions() const { return num_preemptions_; }
  const SchedulerLimits& limits() const { return limits_; }

 private:
  void schedule_running(SchedulerOutput& out, int32_t& budget);
  void schedule_waiting(SchedulerOutput& out, int32_t& budget);
  void add_scheduled(SchedulerOutput& out, Sequence& seq, int32_t num_new);
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
