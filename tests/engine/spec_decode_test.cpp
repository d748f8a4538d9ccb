// Speculative decoding in the engine core, driven step by step over the fake model runner
// (fake_runner.h), which verifies drafts as a real runner does. Scripted proposers that know the
// fake model show: outputs never change whatever the proposer gets right or wrong; the sampling
// rows of a step with drafts (steps, min_tokens bans, penalty histories); EOS, stop strings and
// max_tokens in the middle of an accepted run (the rest is dropped and never counted); drafts never
// take a request past max_tokens; preemption and abort with drafts; a runner that returns a
// malformed multi-token output; the acceptance metrics; and no leaked blocks.
#include <QtTest>

#include <functional>
#include <map>
#include <memory>

#include "engine/runtime/engine.h"
#include "engine/runtime/engine_core.h"
#include "engine/runtime/metrics.h"
#include "engine/runtime/ngram_proposer.h"
#include "engine_test_util.h"
#include "fake_runner.h"
#include "fake_tokenizer.h"
#include "test_support.h"

using namespace lathe;

namespace {

// Proposes the fake model's own continuation (with the runner's forced token; greedy, or seeded
// when `temperature` > 0 and the request's seed is known by its prompt's first token) for the first
// `num_right` drafts, then token 0, which the fake model never produces. Records what it was asked.
class OracleProposer : public DraftProposer {
 public:
  OracleProposer(test::FakeRunnerOptions model, int num_right, int prompt_len)
      : model_(model), num_right_(num_right), prompt_len_(prompt_len) {}

  void propose(std::span<const TokenId> tokens, int32_t max_drafts,
               std::vector<TokenId>* drafts) override {
    asked.push_back({static_cast<int>(tokens.size()) - prompt_len_, max_drafts});
    std::vector<TokenId> ctx(tokens.begin(), tokens.end());
    drafts->clear();
    for (int i = 0; i < max_drafts; ++i) {
      SamplingRow row;
      row.temperature = temperature;
      auto seed = seed_by_first_token.find(tokens[0]);
      row.seed = seed != seed_by_first_token.end() ? seed->second : 0;
      row.step = ctx.size() - static_cast<size_t>(prompt_len_);
      const TokenId t = i < num_right_ ? model_.next_token(ctx, row) : 0;
      drafts->push_back(t);
      ctx.push_back(t);
    }
  }

  struct Ask {
    int num_outputs;  // outputs the sequence had
    int max_drafts;   // drafts it was asked for
  };
  std::vector<Ask> asked;
  float temperature = 0.0f;
  std::map<TokenId, uint64_t> seed_by_first_token;

 private:
  test::FakeModelRunner model_;
  int num_right_;
  int prompt_len_;
};

// The fake runner, keeping every ModelInput it ran and optionally returning one token too many.
class RecordingRunner : public test::FakeModelRunner {
 public:
  using FakeModelRunner::FakeModelRunner;
  Result<ModelOutput> execute(const ModelInput& in) override {
    inputs.push_back(in);
    auto out = FakeModelRunner::execute(in);
    if (out.is_ok() && corrupt_counts && in.has_drafts()) {
      out->num_tokens.assign(in.sample_seqs.size(), 1);
      out->num_tokens[0] = in.sample_count(0) + 1;
    }
    return out;
  }
  std::vector<ModelInput> inputs;
  bool corrupt_counts = false;
};

std::vector<TokenId> prompt_of(int n, int seed) {
  std::vector<TokenId> p;
  for (int i = 0; i < n; ++i) p.push_back(3 + (seed * 37 + i * 11) % 900);
  return p;
}

SamplingParams greedy(int max_tokens) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = max_tokens;
  return p;
}

struct CoreOptions {
  test::FakeRunnerOptions runner;
  int max_num_seqs = 8;
  int max_num_batched_tokens = 64;
  int num_blocks = 128;
  int block_size = 4;
  bool tokenizer = false;
  std::shared_ptr<DraftProposer> proposer;  // null: no speculation
  int k = 4;
};

// An engine core over a recording fake runner, stepped by hand.
class Core {
 public:
  explicit Core(const CoreOptions& o) : runner_(o.runner), metrics_(metrics_options(o)) {
    (void)runner_.allocate_kv_cache(o.num_blocks, o.block_size);
    EngineCoreConfig c;
    c.limits.max_num_seqs = o.max_num_seqs;
    c.limits.max_num_batched_tokens = o.max_num_batched_tokens;
    c.kv = {o.num_blocks, o.block_size, true};
    if (o.tokenizer) c.tokenizer = std::make_shared<test::FakeTokenizer>();
    c.eos_ids = {2};
    c.proposer = o.proposer;
    c.speculative.num_speculative_tokens = o.proposer ? o.k : 0;
    core_ = std::make_unique<EngineCore>(c, &runner_, &metrics_);
  }

  test::Collected* add(std::vector<TokenId> prompt, SamplingParams p, uint64_t seed = 1) {
    collected_.push_back(std::make_unique<test::Collected>());
    CoreRequest r;
    r.id = next_id_++;
    r.prompt = std::move(prompt);
    r.sampling = std::move(p);
    r.seed = seed;
    r.on_event = collected_.back()->callback();
    r.arrival = Clock::now();
    core_->add_request(std::move(r));
    return collected_.back().get();
  }

  // Steps until nothing is left (false after max_steps).
  bool run(int max_steps = 10000) {
    for (int i = 0; i < max_steps && core_->has_unfinished(); ++i) core_->step();
    return !core_->has_unfinished();
  }

  // Every block free or cached-free.
  bool clean() {
    core_->publish_load();
    const MetricsSnapshot s = metrics_.snapshot();
    return s.kv_blocks_used == 0 && s.num_requests_running == 0 &&
           s.kv_blocks_used + s.kv_blocks_cached + s.kv_blocks_free == s.kv_blocks_total;
  }

  EngineCore& core() { return *core_; }
  RecordingRunner& runner() { return runner_; }
  MetricsSnapshot metrics() const { return metrics_.snapshot(); }

 private:
  static MetricsOptions metrics_options(const CoreOptions& o) {
    MetricsOptions m;
    m.model_name = "fake";
    m.max_num_seqs = o.max_num_seqs;
    m.max_num_batched_tokens = o.max_num_batched_tokens;
    m.max_model_len = 256;
    m.kv_blocks_total = o.num_blocks;
    m.kv_block_size = o.block_size;
    return m;
  }

  RecordingRunner runner_;
  MetricsRegistry metrics_;
  std::unique_ptr<EngineCore> core_;
  std::vector<std::unique_ptr<test::Collected>> collected_;
  RequestId next_id_ = 1;
};

struct RunResult {
  std::vector<std::vector<TokenId>> tokens;
  std::vector<std::string> texts;
  std::vector<FinishReason> reasons;
  std::vector<int> completion_tokens;
  MetricsSnapshot metrics;
  bool clean = false;
};

// Runs `n` requests built by `make(i)` together on a core with options `o`.
RunResult run_requests(
    const CoreOptions& o, int n,
    const std::function<std::pair<std::vector<TokenId>, SamplingParams>(int)>& make) {
  Core c(o);
  std::vector<test::Collected*> cs;
  for (int i = 0; i < n; ++i) {
    auto [prompt, params] = make(i);
    cs.push_back(c.add(prompt, params, 100 + static_cast<uint64_t>(i)));
  }
  RunResult r;
  if (!c.run()) return r;
  for (test::Collected* col : cs) {
    r.tokens.push_back(col->tokens);
    r.texts.push_back(col->text);
    r.reasons.push_back(col->last.finish_reason);
    r.completion_tokens.push_back(col->last.usage.completion_tokens);
  }
  r.metrics = c.metrics();
  r.clean = c.clean();
  return r;
}

#define COMPARE_RUNS(a, b)                                  \
  do {                                                      \
    QCOMPARE((a).tokens, (b).tokens);                       \
    QCOMPARE((a).texts, (b).texts);                         \
    QCOMPARE((a).reasons, (b).reasons);                     \
    QCOMPARE((a).completion_tokens, (b).completion_tokens); \
  } while (0)

}  // namespace

class SpecDecodeTest : public QObject {
  Q_OBJECT
 private slots:
  void outputs_do_not_change_whatever_the_proposer_guesses() {
    const int prompt_len = 9;
    struct Case {
      const char* name;
      SamplingParams params;
    };
    SamplingParams seeded = greedy(24);
    seeded.temperature = 0.8f;
    SamplingParams penalized = greedy(24);
    penalized.repetition_penalty = 1.3f;
    penalized.min_tokens = 5;
    for (const Case& k : {Case{"greedy", greedy(24)}, Case{"seeded", seeded},
                          Case{"penalties, min_tokens", penalized}}) {
      auto make = [&](int i) { return std::make_pair(prompt_of(prompt_len, i), k.params); };
      CoreOptions base;
      const RunResult plain = run_requests(base, 6, make);
      QCOMPARE(plain.tokens.size(), size_t{6});
      for (int right : {4, 1, 0}) {
        CoreOptions o;
        auto oracle = std::make_shared<OracleProposer>(o.runner, right, prompt_len);
        oracle->temperature = k.params.temperature;
        for (int i = 0; i < 6; ++i)  // run_requests seeds request i with 100 + i
          oracle->seed_by_first_token[prompt_of(prompt_len, i)[0]] = 100 + static_cast<uint64_t>(i);
        o.proposer = oracle;
        const RunResult spec = run_requests(o, 6, make);
        QVERIFY2(spec.tokens.size() == 6, k.name);
        COMPARE_RUNS(spec, plain);
        QVERIFY(spec.clean);
        const MetricsSnapshot& m = spec.metrics;
        qInfo("%s, %d right: %lld steps (%lld without), %lld of %lld drafts accepted", k.name,
              right, static_cast<long long>(m.num_steps),
              static_cast<long long>(plain.metrics.num_steps),
              static_cast<long long>(m.spec_decode_num_accepted_tokens),
              static_cast<long long>(m.spec_decode_num_draft_tokens));
        QCOMPARE(m.generation_tokens, plain.metrics.generation_tokens);
        QVERIFY(m.spec_decode_num_drafts > 0);
        QVERIFY(m.spec_decode_num_accepted_tokens <= m.spec_decode_num_draft_tokens);
        QVERIFY(m.spec_decode_num_draft_tokens <= 4 * m.spec_decode_num_drafts);
        if (right == 4) {
          QCOMPARE(m.spec_decode_num_accepted_tokens, m.spec_decode_num_draft_tokens);
          QCOMPARE(m.spec_decode_acceptance_rate, 1.0);
          QVERIFY(m.num_steps * 3 < plain.metrics.num_steps);
        }
        if (right == 0) QCOMPARE(m.spec_decode_num_accepted_tokens, int64_t{0});
      }
    }
  }

  void a_step_with_drafts_samples_one_row_per_position() {
    const int prompt_len = 6;
    CoreOptions o;
    auto oracle = std::make_shared<OracleProposer>(o.runner, 4, prompt_len);
    o.proposer = oracle;
    o.k = 3;
    Core c(o);
    SamplingParams p = greedy(12);
    p.temperature = 0.7f;
    p.repetition_penalty = 1.2f;
    p.min_tokens = 3;
    c.add(prompt_of(prompt_len, 1), p, 5);
    QVERIFY(c.run());
    const std::vector<ModelInput>& ins = c.runner().inputs;
    QVERIFY(ins.size() >= 2);
    QVERIFY(!ins[0].has_drafts());  // the prefill
    const ModelInput& in = ins[1];  // the first decode: one output so far, three drafts
    QCOMPARE(in.sample_counts, std::vector<int32_t>{4});
    QCOMPARE(in.num_sample_rows(), 4);
    QCOMPARE(in.num_tokens(), 4);
    QCOMPARE(in.sampling.size(), size_t{4});
    QVERIFY(!in.next_step_continues);
    const std::vector<TokenId> drafts(in.token_ids.begin() + 1, in.token_ids.end());
    for (int j = 0; j < 4; ++j) {
      const SamplingRow& row = in.sampling[static_cast<size_t>(j)];
      QCOMPARE(row.step, uint64_t(1 + j));  // the output index each row samples
      QCOMPARE(row.seed, uint64_t{5});
      QCOMPARE(row.banned_tokens.empty(), 1 + j >= 3);  // min_tokens 3: EOS banned before index 3
      QCOMPARE(row.history_tokens.size(), size_t(prompt_len + 1 + j));
      QCOMPARE(row.history_prompt_len, prompt_len);
      QVERIFY(std::equal(drafts.begin(), drafts.begin() + j, row.history_tokens.end() - j));
    }
    QVERIFY(c.clean());
  }

  void eos_in_an_accepted_run_ends_the_request_there() {
    const int prompt_len = 5;
    CoreOptions o;
    o.runner.force_token_at = 3;  // EOS at output index 3
    o.proposer = std::make_shared<OracleProposer>(o.runner, 4, prompt_len);
    Core c(o);
    test::Collected* r = c.add(prompt_of(prompt_len, 2), greedy(20));
    QVERIFY(c.run());
    // The decode step after the prefill accepts indexes 1..4 and a bonus: EOS at 3 ends it.
    QCOMPARE(r->tokens.size(), size_t{4});
    QCOMPARE(r->tokens.back(), TokenId{2});
    QCOMPARE(r->last.finish_reason, FinishReason::kStop);
    QCOMPARE(r->last.usage.completion_tokens, 4);
    QCOMPARE(r->num_events, 4);  // one event per delivered token
    const MetricsSnapshot m = c.metrics();
    QCOMPARE(m.generation_tokens, int64_t{4});
    QCOMPARE(m.num_steps, int64_t{2});
    QCOMPARE(m.spec_decode_num_accepted_tokens, int64_t{4});
    QVERIFY(c.clean());
  }

  void a_stop_string_in_an_accepted_run_ends_it_there() {
    const int prompt_len = 7;
    CoreOptions base;
    base.tokenizer = true;
    // Learn the fourth output token's text, then stop on it.
    const RunResult learn =
        run_requests(base, 1, [&](int) { return std::make_pair(prompt_of(7, 3), greedy(12)); });
    QCOMPARE(learn.tokens.size(), size_t{1});
    SamplingParams p = greedy(12);
    p.stop = {" w" + std::to_string(learn.tokens[0][3])};
    auto make = [&](int) { return std::make_pair(prompt_of(prompt_len, 3), p); };
    const RunResult plain = run_requests(base, 1, make);
    CoreOptions o = base;
    o.proposer = std::make_shared<OracleProposer>(o.runner, 4, prompt_len);
    const RunResult spec = run_requests(o, 1, make);
    COMPARE_RUNS(spec, plain);
    QCOMPARE(spec.reasons[0], FinishReason::kStop);
    QVERIFY(spec.tokens[0].size() < 12);
    QCOMPARE(spec.metrics.generation_tokens, static_cast<int64_t>(spec.tokens[0].size()));
    QVERIFY(spec.metrics.num_steps < plain.metrics.num_steps);
    QVERIFY(spec.clean);
  }

  void drafts_never_take_a_request_past_max_tokens() {
    const int prompt_len = 8;
    CoreOptions o;
    auto oracle = std::make_shared<OracleProposer>(o.runner, 4, prompt_len);
    o.proposer = oracle;
    Core c(o);
    test::Collected* r = c.add(prompt_of(prompt_len, 4), greedy(6));
    QVERIFY(c.run());
    QCOMPARE(r->tokens.size(), size_t{6});
    QCOMPARE(r->last.finish_reason, FinishReason::kLength);
    QVERIFY(!oracle->asked.empty());
    for (const OracleProposer::Ask& a : oracle->asked) {
      QVERIFY(a.max_drafts >= 1);
      QVERIFY2(a.num_outputs + a.max_drafts + 1 <= 6,
               qPrintable(QString("%1 outputs, %2 drafts").arg(a.num_outputs).arg(a.max_drafts)));
    }
    QCOMPARE(c.metrics().spec_decode_num_draft_tokens, int64_t{4});  // 1 output, then 4 + 1
    QCOMPARE(c.metrics().num_steps, int64_t{2});
    QVERIFY(c.clean());
  }

  void preemption_with_drafts_recomputes_and_finishes_everything() {
    const int prompt_len = 20;
    auto make = [&](int i) { return std::make_pair(prompt_of(prompt_len, i), greedy(20)); };
    CoreOptions base;
    base.max_num_seqs = 16;
    base.num_blocks = 22;  // about two sequences of 40 tokens
    const RunResult plain = run_requests(base, 16, make);
    CoreOptions o = base;
    o.proposer = std::make_shared<OracleProposer>(o.runner, 2, prompt_len);
    o.k = 3;
    const RunResult spec = run_requests(o, 16, make);
    QCOMPARE(spec.tokens.size(), size_t{16});
    COMPARE_RUNS(spec, plain);
    qInfo("%lld preemptions with drafts, %lld without",
          static_cast<long long>(spec.metrics.num_preemptions),
          static_cast<long long>(plain.metrics.num_preemptions));
    QVERIFY(spec.metrics.num_preemptions > 0);
    QVERIFY(spec.metrics.spec_decode_num_accepted_tokens > 0);
    QVERIFY(spec.clean);
  }

  void abort_with_drafts_in_flight_frees_everything() {
    const int prompt_len = 6;
    CoreOptions o;
    o.max_num_seqs = 1;
    o.proposer = std::make_shared<OracleProposer>(o.runner, 1, prompt_len);
    Core c(o);
    test::Collected* running = c.add(prompt_of(prompt_len, 1), greedy(100));
    test::Collected* queued = c.add(prompt_of(prompt_len, 2), greedy(100));
    for (int i = 0; i < 4; ++i) c.core().step();
    QVERIFY(!running->finished && running->tokens.size() > 4);
    QVERIFY(c.runner().inputs.back().has_drafts());
    c.core().abort_request(2);  // waiting
    QVERIFY(queued->finished);
    QCOMPARE(queued->last.finish_reason, FinishReason::kAbort);
    QVERIFY(queued->tokens.empty());
    c.core().abort_request(1);  // decoding with drafts
    QVERIFY(running->finished);
    QCOMPARE(running->last.finish_reason, FinishReason::kAbort);
    QCOMPARE(running->last.usage.completion_tokens, static_cast<int32_t>(running->tokens.size()));
    QVERIFY(!c.core().has_unfinished());
    QVERIFY(c.clean());
  }

  void a_malformed_multi_token_output_fails_the_step_cleanly() {
    const int prompt_len = 6;
    CoreOptions o;
    o.proposer = std::make_shared<OracleProposer>(o.runner, 2, prompt_len);
    Core c(o);
    c.runner().corrupt_counts = true;
    test::Collected* a = c.add(prompt_of(prompt_len, 1), greedy(20));
    QVERIFY(c.run());
    QCOMPARE(a->last.finish_reason, FinishReason::kError);
    QVERIFY2(a->last.error.find("the runner returned") != std::string::npos, a->last.error.c_str());
    QVERIFY(c.clean());
    c.runner().corrupt_counts = false;
    test::Collected* b = c.add(prompt_of(prompt_len, 2), greedy(8));  // the engine goes on
    QVERIFY(c.run());
    QCOMPARE(b->last.finish_reason, FinishReason::kLength);
    QCOMPARE(b->tokens.size(), size_t{8});
  }

  void ngram_proposals_come_from_the_most_recent_match() {
    NgramProposer p(2, 3);
    std::vector<TokenId> out;
    // Last 3 tokens (7 8 9) occur at 1..3 and at 5..7: the most recent is followed by 4 5.
    p.propose(std::vector<TokenId>{6, 7, 8, 9, 1, 7, 8, 9, 4, 5, 7, 8, 9}, 4, &out);
    QCOMPARE(out, (std::vector<TokenId>{4, 5, 7, 8}));
    p.propose(std::vector<TokenId>{6, 7, 8, 9, 1, 7, 8, 9, 4, 5, 7, 8, 9}, 1, &out);
    QCOMPARE(out, std::vector<TokenId>{4});
    // No 3-gram match: the 2-gram (8 9) at 2..3 gives 1 2.
    p.propose(std::vector<TokenId>{5, 8, 9, 1, 2, 3, 8, 9}, 3, &out);
    QCOMPARE(out, (std::vector<TokenId>{1, 2, 3}));
    // Fewer tokens than asked when the match is near the end.
    p.propose(std::vector<TokenId>{1, 2, 5, 1, 2}, 4, &out);
    QCOMPARE(out, (std::vector<TokenId>{5, 1, 2}));
    // Nothing when only a 1-gram repeats (min 2), or the sequence is too short.
    p.propose(std::vector<TokenId>{1, 2, 3, 4, 2}, 4, &out);
    QVERIFY(out.empty());
    p.propose(std::vector<TokenId>{1}, 4, &out);
    QVERIFY(out.empty());
    // Overlapping repeats: a run of one token proposes more of it.
    NgramProposer one(1, 1);
    one.propose(std::vector<TokenId>{3, 3, 3, 3}, 2, &out);
    QCOMPARE(out, std::vector<TokenId>{3});
  }

  // EngineConfig's speculative part reaches the engine: resolved n-gram lengths, and bad values
  // refused at create with a message naming the field.
  void the_engine_takes_and_checks_a_speculative_config() {
    auto make = [](SpeculativeConfig s) {
      EngineConfig c;
      c.device.device = DeviceKind::kCpu;
      c.cache.num_gpu_blocks_override = 64;
      c.speculative = s;
      LoadedModel m;
      m.path = "fake";
      m.format = ModelFormat::kDummy;
      m.config.vocab_size = 1000;
      m.config.max_position_embeddings = 256;
      return Engine::create_with_runner(c, std::move(m), std::make_unique<test::FakeModelRunner>());
    };
    SpeculativeConfig ok;
    ok.method = SpeculativeMethod::kNgram;
    ok.num_speculative_tokens = 3;
    ok.prompt_lookup_max = 4;
    auto e = make(ok);
    LATHE_QVERIFY_RESULT(e);
    QCOMPARE(e.value()->config().speculative.prompt_lookup_min, 4);  // one unset: the other's
    QCOMPARE(e.value()->config().speculative.prompt_lookup_max, 4);
    test::Collected c;
    RequestSpec spec;
    spec.prompt_tokens = {5, 6, 7, 5, 6, 7, 5, 6, 7, 5, 6};
    spec.sampling = greedy(30);
    LATHE_SUBMIT_OK(e.value()->submit(spec, c.callback()));
    QVERIFY(c.wait());
    QCOMPARE(c.tokens.size(), size_t{30});
    LATHE_VERIFY_NO_LEAKS(*e.value());
    ok.prompt_lookup_max = 0;
    auto d = make(ok);
    LATHE_QVERIFY_RESULT(d);
    QCOMPARE(d.value()->config().speculative.prompt_lookup_min, 5);  // vLLM's defaults
    QCOMPARE(d.value()->config().speculative.prompt_lookup_max, 5);

    struct Bad {
      SpeculativeConfig config;
      const char* message_part;
    };
    auto bad = [](SpeculativeMethod m, int k, int lo, int hi) {
      SpeculativeConfig s;
      s.method = m;
      s.num_speculative_tokens = k;
      s.prompt_lookup_min = lo;
      s.prompt_lookup_max = hi;
      return s;
    };
    const SpeculativeMethod ngram = SpeculativeMethod::kNgram, none = SpeculativeMethod::kNone;
    for (const Bad& b : {Bad{bad(ngram, -1, 0, 0), "num_speculative_tokens must be >= 0"},
                         Bad{bad(ngram, 0, 0, 0), "needs num_speculative_tokens in [1, 16]"},
                         Bad{bad(ngram, 17, 0, 0), "needs num_speculative_tokens in [1, 16]"},
                         Bad{bad(ngram, 2, 4, 2), "prompt_lookup_min (4) must be <= "},
                         Bad{bad(ngram, 2, -1, 2), "prompt_lookup_min and prompt_lookup_max"},
                         Bad{bad(ngram, 2, 1, 65), "prompt_lookup_max must be <= 64"},
                         Bad{bad(none, 3, 0, 0), "no method is set"}}) {
      auto r = make(b.config);
      QVERIFY(!r.is_ok());
      QCOMPARE(r.status().code(), ErrorCode::kInvalidArgument);
      QVERIFY2(r.status().message().find(b.message_part) != std::string::npos,
               r.status().message().c_str());
    }
    // A runner that does not verify drafts (the CUDA runner until it follows the contract).
    {
      EngineConfig c;
      c.cache.num_gpu_blocks_override = 64;
      c.speculative = ok;
      LoadedModel m;
      m.format = ModelFormat::kDummy;
      m.config.vocab_size = 1000;
      m.config.max_position_embeddings = 256;
      test::FakeRunnerOptions ro;
      ro.verifies_drafts = false;
      auto r =
          Engine::create_with_runner(c, std::move(m), std::make_unique<test::FakeModelRunner>(ro));
      QVERIFY(!r.is_ok());
      QCOMPARE(r.status().code(), ErrorCode::kInvalidArgument);
      QVERIFY2(
          r.status().message().find("not supported by the cpu backend yet") != std::string::npos,
          r.status().message().c_str());
    }
    SpeculativeMethod m;
    QVERIFY(parse_speculative_method("ngram", &m) && m == SpeculativeMethod::kNgram);
    QVERIFY(!parse_speculative_method("eagle", &m));
  }
};

QTEST_GUILESS_MAIN(SpecDecodeTest)
#include "spec_decode_test.moc"
