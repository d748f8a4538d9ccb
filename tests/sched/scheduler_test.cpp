// The scheduler over a real KV-cache manager, driven by a fake model runner that reads every
// sequence's context back through its block table (tests/engine/fake_runner.h): continuous batching
// under the token and sequence caps, chunked prefill beside decodes, preemption by recompute,
// prefix caching, static batching, draft tokens (speculative decoding: verified in one step,
// dropped rather than starving or preempting anyone, rolled back when rejected, never shared
// through the prefix cache), and no leaked blocks.
#include <QtTest>

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>

#include "engine/runtime/model_input_builder.h"
#include "engine/sched/scheduler.h"
#include "fake_runner.h"
#include "test_support.h"

using namespace lathe;

namespace {

std::vector<TokenId> tokens_from(int n, int seed) {
  std::vector<TokenId> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[i] = 3 + (seed * 131 + i * 17) % 900;
  return t;
}

struct Tracked {
  std::vector<TokenId> prompt;
  int max_tokens = 0;
  std::vector<TokenId> output;
  bool finished = false;
};

// Drives Scheduler + KvCacheManager + FakeModelRunner the way the engine core does.
class Harness {
 public:
  Harness(SchedulerLimits limits, KvCacheConfig kv_config)
      : kv_(kv_config), scheduler_(limits, &kv_), greedy_() {
    (void)runner_.allocate_kv_cache(kv_config.num_blocks, kv_config.block_size);
  }

  void add(RequestId id, std::vector<TokenId> prompt, int max_tokens) {
    auto seq = std::make_unique<Sequence>();
    seq->id = id;
    seq->tokens = prompt;
    seq->num_prompt_tokens = static_cast<int32_t>(prompt.size());
    scheduler_.add(std::move(seq));
    requests_[id] = Tracked{std::move(prompt), max_tokens, {}, false};
  }

  // Draft proposals (speculative decoding): called before each step for every decoding sequence
  // with its tokens and the most drafts it may take (max_tokens not to be passed), as the engine
  // core does.
  using Proposer = std::function<std::vector<TokenId>(const std::vector<TokenId>&, int)>;
  void set_proposer(Proposer p, int k) {
    proposer_ = std::move(p);
    k_ = k;
  }

  // One engine step. Returns the scheduler's output; errors go to `error`.
  SchedulerOutput step() {
    if (proposer_) {
      for (const Sequence* seq : scheduler_.running()) {
        if (seq->num_uncomputed_tokens() != 1) continue;
        const Tracked& r = requests_[seq->id];
        const int room = std::min(k_, r.max_tokens - static_cast<int>(r.output.size()) - 1);
        if (room > 0) scheduler_.set_draft_tokens(seq->id, proposer_(seq->tokens, room));
      }
    }
    SchedulerOutput out = scheduler_.schedule();
    for (const FailedSequence& f : out.failed) {
      requests_[f.id].finished = true;
      failed_.push_back(f.id);
    }
    if (out.empty()) return out;
    ModelInput in = build_model_input(out, kv_.block_size());
    in.sampling.assign(static_cast<size_t>(in.num_sample_rows()), greedy_);
    auto res = runner_.execute(in);
    if (!res.is_ok()) {
      error_ = res.status().message();
      return out;
    }
    for (const ScheduledSequence& s : out.seqs) prefill_tokens_ += s.num_new_prompt_tokens();
    drafts_ += out.num_draft_tokens;
    size_t next = 0;
    for (size_t k = 0; k < in.sample_seqs.size(); ++k) {
      const RequestId id = out.seqs[static_cast<size_t>(in.sample_seqs[k])].id;
      const int n = res->num_tokens_of(k);
      accepted_ += n - 1;
      Tracked& r = requests_[id];
      std::vector<TokenId> produced;
      for (int j = 0; j < n; ++j) produced.push_back(res->tokens[next + j].token);
      next += static_cast<size_t>(n);
      // Tokens past max_tokens are dropped, as the engine core drops them.
      for (TokenId t : produced) {
        r.output.push_back(t);
        if (static_cast<int>(r.output.size()) >= r.max_tokens) break;
      }
      if (static_cast<int>(r.output.size()) >= r.max_tokens) {
        r.finished = true;
        scheduler_.finish(id);
      } else {
        scheduler_.append_tokens(id, produced);
      }
    }
    ++steps_;
    busy_slots_ += static_cast<int64_t>(out.seqs.size());
    return out;
  }

  // Runs until every request finished; false (with error()) on an empty step with work left, a
  // runner error, or more than max_steps steps.
  bool run(int max_steps = 100000) {
    for (int i = 0; i < max_steps && scheduler_.has_unfinished(); ++i) {
      const SchedulerOutput out = step();
      if (!error_.empty()) return false;
      if (out.empty() && out.failed.empty()) {
        error_ = "an empty step with unfinished requests (deadlock)";
        return false;
      }
    }
    if (scheduler_.has_unfinished()) error_ = "did not finish within the step limit";
    return error_.empty();
  }

  // Every block free or cached-free and no request left.
  bool clean() const {
    const KvUsage u = kv_.usage();
    return u.used == 0 && u.used + u.cached_free + u.free == u.total && kv_.num_requests() == 0 &&
           !scheduler_.has_unfinished();
  }

  const std::vector<TokenId>& output(RequestId id) { return requests_[id].output; }
  const std::string& error() const { return error_; }
  Scheduler& scheduler() { return scheduler_; }
  KvCacheManager& kv() { return kv_; }
  int64_t steps() const { return steps_; }
  int64_t prefill_tokens() const { return prefill_tokens_; }
  int64_t busy_slots() const { return busy_slots_; }
  int64_t drafts() const { return drafts_; }      // draft tokens scheduled
  int64_t accepted() const { return accepted_; }  // of which accepted
  const std::vector<RequestId>& failed() const { return failed_; }
  const test::FakeModelRunner& runner() const { return runner_; }

 private:
  KvCacheManager kv_;
  Scheduler scheduler_;
  test::FakeModelRunner runner_;
  SamplingRow greedy_;
  std::map<RequestId, Tracked> requests_;
  std::string error_;
  int64_t steps_ = 0, prefill_tokens_ = 0, busy_slots_ = 0, drafts_ = 0, accepted_ = 0;
  std::vector<RequestId> failed_;
  Proposer proposer_;
  int k_ = 0;
};

SchedulerLimits limits(int seqs, int tokens, bool chunked = true,
                       SchedulingPolicy policy = SchedulingPolicy::kContinuous) {
  SchedulerLimits l;
  l.max_num_seqs = seqs;
  l.max_num_batched_tokens = tokens;
  l.enable_chunked_prefill = chunked;
  l.policy = policy;
  return l;
}

KvCacheConfig cache(int blocks, int block_size = 16, bool prefix = true) {
  return KvCacheConfig{blocks, block_size, prefix};
}

// Proposes `room` drafts to follow `tokens`: the fake model's own greedy continuation for the
// first `num_right`, then token 0 (which the fake model never produces, so it is rejected).
Harness::Proposer oracle(int num_right) {
  return [num_right](const std::vector<TokenId>& tokens, int room) {
    static const test::FakeModelRunner model;
    std::vector<TokenId> ctx = tokens, drafts;
    for (int i = 0; i < room; ++i) {
      const TokenId t = i < num_right ? model.greedy_next(ctx) : 0;
      drafts.push_back(t);
      ctx.push_back(t);
    }
    return drafts;
  };
}

// What a request produces alone, with room to spare.
std::vector<TokenId> run_alone(const std::vector<TokenId>& prompt, int max_tokens) {
  Harness h(limits(1, 4096), cache(512));
  h.add(1, prompt, max_tokens);
  if (!h.run()) return {};
  return h.output(1);
}

}  // namespace

#define HARNESS_RUN(h) QVERIFY2((h).run(), (h).error().c_str())

class SchedulerTest : public QObject {
  Q_OBJECT
 private slots:
  void continuous_batching_keeps_the_caps_and_the_outputs() {
    Harness h(limits(4, 32), cache(64));
    for (RequestId id = 1; id <= 10; ++id)
      h.add(id, tokens_from(5 + 9 * static_cast<int>(id), id), 8);
    for (int i = 0; i < 1000 && h.scheduler().has_unfinished(); ++i) {
      const SchedulerOutput out = h.step();
      QVERIFY2(h.error().empty(), h.error().c_str());
      QVERIFY(!out.empty());
      QVERIFY(static_cast<int>(out.seqs.size()) <= 4);
      QVERIFY(out.num_batched_tokens <= 32);
      int mid_prefill = 0;
      for (const ScheduledSequence& s : out.seqs) {
        QVERIFY(s.num_new_tokens >= 1);
        mid_prefill += s.sample ? 0 : 1;
      }
      QVERIFY(mid_prefill <= 1);  // at most one prompt is split, so decodes always fit beside it
      if (mid_prefill == 1) QVERIFY(!out.seqs.back().sample);  // and it is the newest
    }
    QVERIFY(h.clean());
    for (RequestId id = 1; id <= 10; ++id)
      QCOMPARE(h.output(id), run_alone(tokens_from(5 + 9 * static_cast<int>(id), id), 8));
  }

  void waiting_requests_are_served_first_come_first_served() {
    Harness h(limits(2, 64), cache(64));
    for (RequestId id = 1; id <= 5; ++id) h.add(id, tokens_from(8, id), 3);
    std::vector<RequestId> admitted;
    while (h.scheduler().has_unfinished()) {
      const SchedulerOutput out = h.step();
      QVERIFY(!out.empty());
      for (const AdmittedSequence& a : out.admitted) admitted.push_back(a.id);
    }
    QCOMPARE(admitted, (std::vector<RequestId>{1, 2, 3, 4, 5}));
  }

  void chunked_prefill_runs_beside_decodes_every_step() {
    const int budget = 16;
    Harness h(limits(4, budget), cache(128));
    for (RequestId id = 1; id <= 3; ++id) h.add(id, tokens_from(4, id), 60);
    h.step();  // the three short prompts: prefilled, now decoding
    const auto long_prompt = tokens_from(8 * budget, 99);
    h.add(9, long_prompt, 4);
    int prefill_steps = 0;
    while (h.output(9).empty()) {
      const SchedulerOutput out = h.step();
      QVERIFY2(h.error().empty(), h.error().c_str());
      ++prefill_steps;
      QCOMPARE(static_cast<int>(out.seqs.size()), 4);  // every decode is in every step
      for (const ScheduledSequence& s : out.seqs) {
        if (s.id == 9) {
          QVERIFY(s.num_new_tokens <= budget - 3);
        } else {
          QCOMPARE(s.num_new_tokens, 1);
          QVERIFY(s.sample);
        }
      }
      QVERIFY(out.num_batched_tokens <= budget);
    }
    QCOMPARE(prefill_steps, (8 * budget + 12) / 13);  // chunks of budget - 3 decodes
    HARNESS_RUN(h);
    QCOMPARE(h.output(9), run_alone(long_prompt, 4));  // the same as unchunked
    QVERIFY(h.clean());
  }

  void without_chunked_prefill_a_prompt_runs_in_one_step() {
    Harness h(limits(4, 64, /*chunked=*/false), cache(64));
    h.add(1, tokens_from(4, 1), 20);
    h.step();
    h.add(2, tokens_from(60, 2), 2);  // 60 + 1 decode > 64? no: 61 <= 64, fits
    h.add(3, tokens_from(63, 3), 2);  // would need 63 + 2 decodes: waits for a later step
    const SchedulerOutput out = h.step();
    bool saw2 = false;
    for (const ScheduledSequence& s : out.seqs) {
      if (s.id == 2) {
        QCOMPARE(s.num_new_tokens, 60);
        saw2 = true;
      }
      QVERIFY(s.id != 3);
    }
    QVERIFY(saw2);
    HARNESS_RUN(h);
    QVERIFY(h.clean());
  }

  void preemption_recomputes_and_every_request_finishes() {
    // 16 requests of 20 + 20 tokens (10 blocks of 4 at full length) over 22 blocks: about two at
    // once.
    Harness h(limits(16, 64), cache(22, 4));
    for (RequestId id = 1; id <= 16; ++id) h.add(id, tokens_from(20, id), 20);
    int64_t preempted = 0;
    for (int i = 0; i < 5000 && h.scheduler().has_unfinished(); ++i) {
      const SchedulerOutput out = h.step();
      QVERIFY2(h.error().empty(), h.error().c_str());
      QVERIFY2(!out.empty(), "deadlock: nothing scheduled");
      for (RequestId victim : out.preempted) {
        ++preempted;
        // The newest running sequence is the one preempted.
        for (const ScheduledSequence& s : out.seqs) QVERIFY(s.id < victim);
      }
      QVERIFY(out.preempted.empty() || out.admitted.empty());
    }
    QVERIFY(!h.scheduler().has_unfinished());
    qInfo("%lld preemptions in %lld steps", static_cast<long long>(preempted),
          static_cast<long long>(h.steps()));
    QVERIFY(preempted > 0);
    QCOMPARE(h.scheduler().num_preemptions(), preempted);
    for (RequestId id = 1; id <= 16; ++id)
      QCOMPARE(h.output(id), run_alone(tokens_from(20, id), 20));
    QVERIFY(h.clean());
  }

  void prefix_caching_cuts_prefill_work_by_80_percent() {
    const auto system = tokens_from(200, 7);
    auto prompt = [&](int i) {
      auto p = system;
      const auto tail = tokens_from(10, 1000 + i);
      p.insert(p.end(), tail.begin(), tail.end());
      return p;
    };
    Harness on(limits(64, 512), cache(400, 16, true));
    Harness off(limits(64, 512), cache(400, 16, false));
    int64_t queries = 0, hits = 0;
    for (int i = 0; i < 20; ++i) {
      on.add(i + 1, prompt(i), 4);
      off.add(i + 1, prompt(i), 4);
    }
    while (on.scheduler().has_unfinished()) {
      const SchedulerOutput out = on.step();
      QVERIFY2(on.error().empty(), on.error().c_str());
      for (const AdmittedSequence& a : out.admitted) {
        queries += a.num_tokens;
        hits += a.num_cached_tokens;
      }
    }
    HARNESS_RUN(off);
    qInfo("prefill tokens computed: %lld with prefix caching, %lld without",
          static_cast<long long>(on.prefill_tokens()),
          static_cast<long long>(off.prefill_tokens()));
    QCOMPARE(off.prefill_tokens(), int64_t{20 * 210});
    QVERIFY2(on.prefill_tokens() <= off.prefill_tokens() / 5,
             qPrintable(QString("with caching %1 prefill tokens, without %2")
                            .arg(on.prefill_tokens())
                            .arg(off.prefill_tokens())));
    QCOMPARE(queries, int64_t{20 * 210});
    QCOMPARE(hits, int64_t{19 * 192});  // 12 full shared blocks for every request after the first
    for (int i = 0; i < 20; ++i) QCOMPARE(on.output(i + 1), off.output(i + 1));
    QVERIFY(on.clean());
    QVERIFY(off.clean());
  }

  void static_batching_leaves_slots_idle_continuous_fills_them() {
    const int lengths[] = {4, 12, 20, 8};
    {
      Harness h(limits(4, 256, true, SchedulingPolicy::kStatic), cache(128));
      for (int i = 0; i < 4; ++i) h.add(i + 1, tokens_from(6, i), lengths[i]);
      HARNESS_RUN(h);
      QCOMPARE(h.steps(), int64_t{20});  // the batch runs until its longest member ends
      const double util = static_cast<double>(h.busy_slots()) / (h.steps() * 4.0);
      QCOMPARE(util, 44.0 / 80.0);
      QVERIFY(h.clean());
    }
    {
      // Static over a queue: each batch of 4 waits for its longest member.
      Harness s(limits(4, 256, true, SchedulingPolicy::kStatic), cache(128));
      Harness c(limits(4, 256), cache(128));
      for (int i = 0; i < 32; ++i) {
        s.add(i + 1, tokens_from(6, i), lengths[i % 4]);
        c.add(i + 1, tokens_from(6, i), lengths[i % 4]);
      }
      HARNESS_RUN(s);
      HARNESS_RUN(c);
      const double us = static_cast<double>(s.busy_slots()) / (s.steps() * 4.0);
      const double uc = static_cast<double>(c.busy_slots()) / (c.steps() * 4.0);
      qInfo("slot utilization over 32 requests: static %.3f, continuous %.3f", us, uc);
      QVERIFY2(us < 0.6, qPrintable(QString::number(us)));
      QVERIFY2(uc > 0.85, qPrintable(QString::number(uc)));
      for (int i = 0; i < 32; ++i) QCOMPARE(s.output(i + 1), c.output(i + 1));
    }
  }

  void finishing_a_request_frees_its_blocks_at_once() {
    Harness h(limits(4, 64), cache(32, 4));
    h.add(1, tokens_from(20, 1), 50);
    h.add(2, tokens_from(20, 2), 50);
    h.step();
    h.step();
    const int used = h.kv().usage().used;
    const int blocks1 = static_cast<int>(h.kv().block_table(1).size());
    QVERIFY(blocks1 > 0);
    QVERIFY(h.scheduler().finish(1));  // abort mid-stream
    QCOMPARE(h.kv().usage().used, used - blocks1);
    QVERIFY(!h.scheduler().finish(1));  // already gone
    // A waiting request is simply removed.
    h.add(3, tokens_from(8, 3), 5);
    QCOMPARE(h.scheduler().num_waiting(), 1);
    QVERIFY(h.scheduler().finish(3));
    QCOMPARE(h.scheduler().num_waiting(), 0);
    QVERIFY(h.scheduler().finish(2));
    QVERIFY(h.clean());
  }

  void a_sequence_larger_than_the_cache_fails_instead_of_hanging() {
    Harness h(limits(4, 64), cache(3, 4));  // 12 tokens in all
    h.add(1, tokens_from(20, 1), 4);
    h.add(2, tokens_from(5, 2), 2);
    HARNESS_RUN(h);
    QCOMPARE(h.failed(), std::vector<RequestId>{1});
    QCOMPARE(static_cast<int>(h.output(2).size()), 2);
    // Growing past the cache while decoding alone fails too, rather than preempting forever.
    Harness g(limits(4, 64), cache(3, 4));
    g.add(1, tokens_from(10, 1), 8);  // 10 + 8 > 12 tokens
    HARNESS_RUN(g);
    QCOMPARE(g.failed(), std::vector<RequestId>{1});
    QVERIFY(g.clean());
  }

  // Drafts ride with decodes; whatever the proposer gets right or wrong, every request produces
  // what it produces alone, and right drafts save steps.
  void drafts_are_verified_and_outputs_do_not_change() {
    auto add_all = [](Harness& h) {
      for (RequestId id = 1; id <= 6; ++id)
        h.add(id, tokens_from(5 + 7 * static_cast<int>(id), id), 20);
    };
    Harness plain(limits(8, 64), cache(128));
    add_all(plain);
    HARNESS_RUN(plain);
    for (int right : {4, 2, 0}) {
      Harness h(limits(8, 64), cache(128));
      h.set_proposer(oracle(right), 4);
      add_all(h);
      HARNESS_RUN(h);
      for (RequestId id = 1; id <= 6; ++id) QCOMPARE(h.output(id), plain.output(id));
      QVERIFY(h.clean());
      qInfo("%d right: %lld steps (%lld without drafts), %lld of %lld drafts accepted", right,
            static_cast<long long>(h.steps()), static_cast<long long>(plain.steps()),
            static_cast<long long>(h.accepted()), static_cast<long long>(h.drafts()));
      QVERIFY(h.drafts() > 0);
      if (right == 4) {
        QCOMPARE(h.accepted(), h.drafts());
        QVERIFY(h.steps() * 2 < plain.steps());
      } else if (right == 2) {
        QVERIFY(h.accepted() > 0 && h.accepted() < h.drafts());
        QVERIFY(h.steps() < plain.steps());
      } else {
        QCOMPARE(h.accepted(), int64_t{0});
      }
      // Each sequence-step yields at most 1 + its drafts tokens, and rows were sampled for all.
      QVERIFY(h.runner().rows_sampled() >= h.drafts());
    }
  }

  void drafts_are_dropped_rather_than_starve_others() {
    Harness h(limits(4, 8), cache(128));
    h.set_proposer(oracle(4), 4);
    for (RequestId id = 1; id <= 4; ++id) h.add(id, tokens_from(2, id), 30);
    bool starved_drafts = false;
    while (h.scheduler().has_unfinished()) {
      std::vector<RequestId> before;
      for (const Sequence* seq : h.scheduler().running()) before.push_back(seq->id);
      const SchedulerOutput out = h.step();
      QVERIFY2(h.error().empty(), h.error().c_str());
      QVERIFY(out.num_batched_tokens <= 8);
      // Every sequence that was running before the step gets at least its one token.
      for (RequestId id : before)
        QVERIFY(std::any_of(out.seqs.begin(), out.seqs.end(),
                            [&](const ScheduledSequence& s) { return s.id == id; }));
      int with = 0, without = 0;
      for (const ScheduledSequence& s : out.seqs) {
        QCOMPARE(s.num_new_tokens, static_cast<int32_t>(s.token_ids.size()));
        (s.num_draft_tokens > 0 ? with : without) += 1;
      }
      if (out.seqs.size() == 4 && with > 0 && without > 0) starved_drafts = true;
    }
    QVERIFY(starved_drafts);  // the budget gave drafts to the oldest, one token to the rest
    for (RequestId id = 1; id <= 4; ++id) QCOMPARE(h.output(id), run_alone(tokens_from(2, id), 30));
    QVERIFY(h.clean());
  }

  void drafts_only_take_free_blocks_and_never_preempt() {
    Harness h(limits(4, 64), cache(4, 4));
    h.set_proposer(oracle(4), 4);
    h.add(1, tokens_from(2, 1), 8);
    h.step();                           // prefill: 3 tokens, 2 computed, in block 0
    QVERIFY(h.kv().allocate(999, 12));  // every other block is held by someone else
    SchedulerOutput out = h.step();
    QCOMPARE(int(out.seqs.size()), 1);
    QCOMPARE(out.seqs[0].num_draft_tokens, 1);  // what block 0 still holds: position 3
    QVERIFY(out.preempted.empty());
    h.kv().free(999);
    out = h.step();
    QCOMPARE(out.seqs[0].num_draft_tokens, 4);  // 3 outputs so far: 4 + 1 more reach max_tokens 8
    HARNESS_RUN(h);
    QCOMPARE(h.output(1), run_alone(tokens_from(2, 1), 8));
    QVERIFY(h.clean());
  }

  void preempting_sequences_with_drafts_recomputes_them() {
    Harness h(limits(16, 64), cache(22, 4));
    h.set_proposer(oracle(2), 3);
    for (RequestId id = 1; id <= 16; ++id) h.add(id, tokens_from(20, id), 20);
    HARNESS_RUN(h);
    qInfo("%lld preemptions, %lld of %lld drafts accepted",
          static_cast<long long>(h.scheduler().num_preemptions()),
          static_cast<long long>(h.accepted()), static_cast<long long>(h.drafts()));
    QVERIFY(h.scheduler().num_preemptions() > 0);
    QVERIFY(h.accepted() > 0);
    for (RequestId id = 1; id <= 16; ++id)
      QCOMPARE(h.output(id), run_alone(tokens_from(20, id), 20));
    QVERIFY(h.clean());
  }

  // Rejected drafts' K/V sit in the sequence's blocks until rewritten, so those blocks must never
  // be found by another request, not even one whose prompt continues with exactly those drafts.
  void a_rejected_drafts_block_is_never_shared() {
    Harness h(limits(4, 64), cache(64, 4));
    h.set_proposer(oracle(0), 4);  // four wrong drafts (token 0) every time
    h.add(1, tokens_from(6, 1), 10);
    h.step();  // prefill: 7 tokens
    SchedulerOutput out = h.step();
    QCOMPARE(out.seqs[0].num_draft_tokens, 4);  // positions 7..10 (blocks 1 and 2) hold drafts
    std::vector<TokenId> b = tokens_from(6, 1);
    b.push_back(h.output(1)[0]);
    b.insert(b.end(), {0, 0, 0, 0});  // what request 1's blocks 1 and 2 were written with
    const auto tail = tokens_from(5, 2);
    b.insert(b.end(), tail.begin(), tail.end());
    h.add(2, b, 4);
    out = h.step();
    QCOMPARE(int(out.admitted.size()), 1);
    QCOMPARE(out.admitted[0].num_cached_tokens, 4);  // block 0 only: verified tokens
    HARNESS_RUN(h);
    QCOMPARE(h.output(2), run_alone(b, 4));
    QCOMPARE(h.output(1), run_alone(tokens_from(6, 1), 10));
    QVERIFY(h.clean());
  }
};

QTEST_GUILESS_MAIN(SchedulerTest)
#include "scheduler_test.moc"
