#include "engine/sched/scheduler.h"

#include <algorithm>
#include <cassert>

namespace lathe {

namespace {
bool earlier(const Sequence* a, const Sequence* b) {
  return a->arrival_index < b->arrival_index;
}
}  // namespace

Scheduler::Scheduler(const SchedulerLimits& limits, KvCacheManager* kv)
    : limits_(limits), kv_(kv) {}

void Scheduler::add(std::unique_ptr<Sequence> seq) {
  assert(seqs_.count(seq->id) == 0);
  seq->status = SeqStatus::kWaiting;
  seq->num_computed_tokens = 0;
  seq->arrival_index = next_arrival_++;
  Sequence* raw = seq.get();
  seqs_.emplace(seq->id, std::move(seq));
  waiting_.push_back(raw);  // newest: arrival order is preserved
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  int32_t budget = limits_.max_num_batched_tokens;
  if (limits_.policy == SchedulingPolicy::kStatic && static_batch_.empty() && running_.empty()) {
    for (size_t i = 0; i < waiting_.size() && static_cast<int32_t>(i) < limits_.max_num_seqs; ++i)
      static_batch_.insert(waiting_[i]->id);
  }
  schedule_running(out, budget);
  if (out.preempted.empty()) schedule_waiting(out, budget);
  return out;
}

void Scheduler::schedule_running(SchedulerOutput& out, int32_t& budget) {
  for (size_t i = 0; i < running_.size(); ++i) {
    Sequence& seq = *running_[i];
    const int32_t uncomputed = seq.num_uncomputed_tokens();
    const int32_t num_new = std::min(uncomputed, budget);
    if (num_new <= 0) continue;
    if (num_new < uncomputed && !limits_.enable_chunked_prefill) continue;
    const int32_t num_drafts =
        seq.draft_tokens.empty()
            ? 0
            : schedulable_drafts(seq, budget, static_cast<int32_t>(running_.size() - i - 1));

    bool self_preempted = false;
    while (!kv_->allocate(seq.id, seq.num_computed_tokens + num_new)) {
      Sequence* victim = running_.back();
      if (victim == &seq && running_.size() == 1) {
        // Alone and still short of blocks: the cache can never hold this sequence.
        out.failed.push_back({seq.id, seq.num_tokens()});
        running_.pop_back();
        kv_->free(seq.id);
        static_batch_.erase(seq.id);
        seqs_.erase(seq.id);  // invalidates `seq`
        return;
      }
      running_.pop_back();
      preempt(*victim, out);
      if (victim == &seq) {
        self_preempted = true;
        break;
      }
    }
    if (self_preempted) break;  // it was the newest: nothing runs after it
    add_scheduled(out, seq, num_new, num_drafts);
    budget -= num_new + num_drafts;
  }
}

int32_t Scheduler::schedulable_drafts(Sequence& seq, int32_t budget, int32_t num_later) {
  int32_t n = 0;
  if (seq.num_uncomputed_tokens() == 1) {
    // One token for this sequence and one for each running sequence after it come first.
    n = std::clamp(budget - 1 - num_later, 0, static_cast<int32_t>(seq.draft_tokens.size()));
    // Only in blocks that are free: drafts never preempt. Short of blocks, as many as the
    // sequence's own blocks hold.
    if (n > 0 && !kv_->allocate(seq.id, seq.num_computed_tokens + 1 + n)) {
      const int32_t held =
          static_cast<int32_t>(kv_->block_table(seq.id).size()) * kv_->block_size();
      n = std::clamp(held - seq.num_computed_tokens - 1, 0, n);
    }
  }
  seq.draft_tokens.resize(static_cast<size_t>(n));
  return n;
}

bool Scheduler::may_admit(const Sequence& seq) const {
  return limits_.policy != SchedulingPolicy::kStatic || static_batch_.count(seq.id) != 0;
}

void Scheduler::schedule_waiting(SchedulerOutput& out, int32_t& budget) {
  while (!waiting_.empty() && num_running() < limits_.max_num_seqs && budget > 0) {
    Sequence& seq = *waiting_.front();
    if (!may_admit(seq)) break;
    const PrefixHit hit = kv_->find_prefix_hit(seq.tokens, seq.extra_key);
    const int32_t uncomputed = seq.num_tokens() - hit.num_tokens;
    const int32_t num_new = std::min(uncomputed, budget);
    if (num_new < uncomputed && !limits_.enable_chunked_prefill) break;
    if (!kv_->allocate(seq.id, hit.num_tokens + num_new, hit)) {
      if (running_.empty() && !kv_->can_allocate(seq.id, hit.num_tokens + num_new)) {
        // Even an empty cache could not hold it.
        out.failed.push_back({seq.id, seq.num_tokens()});
        waiting_.pop_front();
        static_batch_.erase(seq.id);
        seqs_.erase(seq.id);
        continue;
      }
      break;  // first come, first served: the head waits for blocks
    }
    waiting_.pop_front();
    const bool first = seq.num_cached_tokens < 0;
    if (first) seq.num_cached_tokens = hit.num_tokens;
    out.admitted.push_back({seq.id, seq.num_tokens(), hit.num_tokens, first});
    seq.num_computed_tokens = hit.num_tokens;
    seq.status = SeqStatus::kRunning;
    insert_running(&seq);
    add_scheduled(out, seq, num_new, 0);
    budget -= num_new;
  }
}

void Scheduler::add_scheduled(SchedulerOutput& out, Sequence& seq, int32_t num_new,
                              int32_t num_drafts) {
  ScheduledSequence s;
  s.id = seq.id;
  s.num_computed_tokens = seq.num_computed_tokens;
  s.num_new_tokens = num_new + num_drafts;
  s.num_prompt_tokens = seq.num_prompt_tokens;
  s.num_draft_tokens = num_drafts;
  s.sample = seq.num_computed_tokens + num_new == seq.num_tokens();
  s.token_ids.assign(seq.tokens.begin() + seq.num_computed_tokens,
                     seq.tokens.begin() + seq.num_computed_tokens + num_new);
  if (num_drafts > 0)
    s.token_ids.insert(s.token_ids.end(), seq.draft_tokens.begin(),
                       seq.draft_tokens.begin() + num_drafts);
  const auto table = kv_->block_table(seq.id);
  s.block_table.assign(table.begin(), table.end());
  seq.num_computed_tokens += num_new + num_drafts;
  seq.num_scheduled_drafts = num_drafts;
  // The K/V of every full block up to here are written by this step: publish them now so that
  // requests admitted in this same step already share them. Only verified tokens: drafts are not
  // in seq.tokens.
  kv_->cache_blocks(seq.id, seq.tokens, std::min(seq.num_computed_tokens, seq.num_tokens()),
                    seq.extra_key);
  out.num_batched_tokens += num_new + num_drafts;
  out.num_draft_tokens += num_drafts;
  out.seqs.push_back(std::move(s));
}

void Scheduler::preempt(Sequence& seq, SchedulerOutput& out) {
  kv_->free(seq.id);
  seq.num_computed_tokens = 0;
  seq.draft_tokens.clear();  // recomputed from its verified tokens; proposals come again later
  seq.num_scheduled_drafts = 0;
  seq.status = SeqStatus::kWaiting;
  ++num_preemptions_;
  insert_waiting(&seq);
  out.preempted.push_back(seq.id);
}

void Scheduler::insert_running(Sequence* seq) {
  running_.insert(std::upper_bound(running_.begin(), running_.end(), seq, earlier), seq);
}

void Scheduler::insert_waiting(Sequence* seq) {
  waiting_.insert(std::upper_bound(waiting_.begin(), waiting_.end(), seq, earlier), seq);
}

void Scheduler::set_draft_tokens(RequestId id, std::span<const TokenId> drafts) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  Sequence& seq = *it->second;
  if (seq.status == SeqStatus::kRunning && seq.num_uncomputed_tokens() == 1) {
    seq.draft_tokens.assign(drafts.begin(), drafts.end());
  } else {
    seq.draft_tokens.clear();
  }
}

void Scheduler::append_token(RequestId id, TokenId token) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  it->second->tokens.push_back(token);
  if (it->second->num_scheduled_drafts > 0) resolve_drafts(*it->second, 1);
}

void Scheduler::append_tokens(RequestId id, std::span<const TokenId> tokens) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  Sequence& seq = *it->second;
  seq.tokens.insert(seq.tokens.end(), tokens.begin(), tokens.end());
  resolve_drafts(seq, static_cast<int32_t>(tokens.size()));
}

void Scheduler::resolve_drafts(Sequence& seq, int32_t num_appended) {
  if (seq.num_scheduled_drafts > 0) {
    const int32_t accepted = std::clamp(num_appended - 1, 0, seq.num_scheduled_drafts);
    seq.num_computed_tokens -= seq.num_scheduled_drafts - accepted;
    // The rejected drafts' K/V stay in the kept blocks until rewritten; blocks past the tokens go.
    kv_->truncate(seq.id, seq.num_tokens());
  }
  seq.num_scheduled_drafts = 0;
  seq.draft_tokens.clear();
}

bool Scheduler::finish(RequestId id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return false;
  Sequence* seq = it->second.get();
  if (seq->status == SeqStatus::kRunning) {
    running_.erase(std::find(running_.begin(), running_.end(), seq));
  } else {
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), seq));
  }
  kv_->free(id);
  static_batch_.erase(id);
  seqs_.erase(it);
  return true;
}

const Sequence* Scheduler::find(RequestId id) const {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? nullptr : it->second.get();
}

std::vector<RequestId> Scheduler::unfinished_ids() const {
  std::vector<RequestId> ids;
  for (const Sequence* s : running_) ids.push_back(s->id);
  for (const Sequence* s : waiting_) ids.push_back(s->id);
  return ids;
}

}  // namespace lathe
