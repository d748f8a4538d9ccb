// Speculative decoding (prompt-lookup / n-gram drafts) end to end on the CPU backend: the tiny
// random-weight Llama fixture (tests/fixtures/models/llama_tied) and the default model when it is
// present. With speculation on, greedy, seeded and penalized outputs are identical to those with it
// off (the CPU runner is batch-invariant, so the verified rows are bit for bit what one-token steps
// compute), drafts are accepted where the text repeats, and every KV block ends free or
// cached-free.
#include <QtTest>

#include <filesystem>

#include "engine/runtime/engine.h"
#include "engine/runtime/metrics.h"
#include "engine_test_util.h"
#include "test_support.h"

using namespace lathe;

namespace {

struct Options {
  int num_speculative_tokens = 0;  // 0: off
  int prompt_lookup_min = 1;
  int prompt_lookup_max = 3;
  int max_num_seqs = 16;
  int max_num_batched_tokens = 256;
  int max_model_len = 0;
  int num_blocks = 0;
  std::string model;  // empty: the tiny fixture
};

Result<std::unique_ptr<Engine>> make_engine(const Options& o) {
  const bool fixture = o.model.empty();
  EngineConfig c;
  c.model_path = fixture ? test::fixture_path("models/llama_tied") : o.model;
  c.load.load_tokenizer = !fixture;
  c.device.device = DeviceKind::kCpu;
  c.device.num_threads = 2;
  c.scheduler.max_num_seqs = o.max_num_seqs;
  c.scheduler.max_num_batched_tokens = o.max_num_batched_tokens;
  c.scheduler.max_model_len = o.max_model_len;
  c.cache.num_gpu_blocks_override = o.num_blocks;
  c.cache.kv_cache_memory_bytes = o.num_blocks > 0 ? 0 : int64_t{64} << 20;
  if (o.num_speculative_tokens > 0) {
    c.speculative.method = SpeculativeMethod::kNgram;
    c.speculative.num_speculative_tokens = o.num_speculative_tokens;
    c.speculative.prompt_lookup_min = o.prompt_lookup_min;
    c.speculative.prompt_lookup_max = o.prompt_lookup_max;
  }
  return Engine::create(c);
}

// Two engines alike but for speculation: `base` as given (off), and with k n-gram drafts (on).
struct OffOn {
  std::unique_ptr<Engine> off, on;
};
Result<OffOn> make_off_on(const Options& base, int k) {
  Options with = base;
  with.num_speculative_tokens = k;
  OffOn e;
  LATHE_ASSIGN_OR_RETURN(e.off, make_engine(base));
  LATHE_ASSIGN_OR_RETURN(e.on, make_engine(with));
  return e;
}

// A prompt that repeats a short phrase (so prompt lookup finds matches) with a varying tail.
std::vector<TokenId> repetitive_prompt(int n, int seed) {
  std::vector<TokenId> p;
  for (int i = 0; i < n; ++i) p.push_back(3 + (seed * 13 + (i % (3 + seed % 4)) * 29) % 290);
  for (int i = 0; i < 4; ++i) p.push_back(3 + (seed * 71 + i * 17) % 290);
  return p;
}

struct Outcome {
  std::vector<std::vector<TokenId>> tokens;
  std::vector<FinishReason> reasons;
  std::vector<int32_t> completion_tokens;
};

// Submits all specs at once and waits for each.
Outcome run_together(Engine& engine, const std::vector<RequestSpec>& specs) {
  std::vector<std::unique_ptr<test::Collected>> cs;
  std::vector<StreamCallback> callbacks;
  for (size_t i = 0; i < specs.size(); ++i) {
    cs.push_back(std::make_unique<test::Collected>());
    callbacks.push_back(cs.back()->callback());
  }
  Outcome o;
  if (!engine.submit_batch(specs, std::move(callbacks)).is_ok()) return o;
  for (auto& c : cs) {
    if (!c->wait()) return Outcome{};
    o.tokens.push_back(c->tokens);
    o.reasons.push_back(c->last.finish_reason);
    o.completion_tokens.push_back(c->last.usage.completion_tokens);
  }
  return o;
}

std::vector<RequestSpec> specs_of(const SamplingParams& params, int n) {
  std::vector<RequestSpec> specs;
  for (int i = 0; i < n; ++i) {
    RequestSpec s;
    s.prompt_tokens = repetitive_prompt(12 + 5 * i, i);
    s.sampling = params;
    if (s.sampling.seed) s.sampling.seed = *params.seed + static_cast<uint64_t>(i);
    specs.push_back(s);
  }
  return specs;
}

}  // namespace

class SpecDecodeIntegrationTest : public QObject {
  Q_OBJECT
 private slots:
  void outputs_with_ngram_speculation_equal_outputs_without() {
    auto engines = make_off_on(Options{}, 4);
    LATHE_QVERIFY_RESULT(engines);
    Engine& off = *engines->off;
    Engine& on = *engines->on;

    SamplingParams greedy;
    greedy.temperature = 0.0f;
    greedy.max_tokens = 40;
    greedy.ignore_eos = true;
    SamplingParams seeded = greedy;
    seeded.temperature = 0.9f;
    seeded.top_p = 0.95f;
    seeded.top_k = 50;
    seeded.seed = 1234;
    SamplingParams penalized = greedy;
    penalized.temperature = 0.7f;
    penalized.seed = 99;
    penalized.repetition_penalty = 1.15f;
    penalized.presence_penalty = 0.4f;
    penalized.frequency_penalty = 0.2f;
    penalized.min_tokens = 6;
    penalized.ignore_eos = false;
    penalized.logprobs = 2;
    struct Case {
      const char* name;
      SamplingParams params;
    };
    for (const Case& k : {Case{"greedy", greedy}, Case{"seeded", seeded},
                          Case{"penalties, min_tokens, logprobs", penalized}}) {
      const std::vector<RequestSpec> specs = specs_of(k.params, 12);
      const int64_t drafts0 = on.metrics().snapshot().spec_decode_num_draft_tokens;
      const int64_t accepted0 = on.metrics().snapshot().spec_decode_num_accepted_tokens;
      const int64_t steps_on0 = on.metrics().snapshot().num_steps;
      const int64_t steps_off0 = off.metrics().snapshot().num_steps;
      const Outcome a = run_together(off, specs);
      const Outcome b = run_together(on, specs);
      QVERIFY2(a.tokens.size() == 12, k.name);
      QCOMPARE(b.tokens, a.tokens);
      QCOMPARE(b.reasons, a.reasons);
      QCOMPARE(b.completion_tokens, a.completion_tokens);
      const MetricsSnapshot m = on.metrics().snapshot();
      const int64_t drafts = m.spec_decode_num_draft_tokens - drafts0;
      const int64_t accepted = m.spec_decode_num_accepted_tokens - accepted0;
      const int64_t steps_on = m.num_steps - steps_on0;
      const int64_t steps_off = off.metrics().snapshot().num_steps - steps_off0;
      qInfo("%s: %lld of %lld drafts accepted; %lld steps with speculation, %lld without", k.name,
            static_cast<long long>(accepted), static_cast<long long>(drafts),
            static_cast<long long>(steps_on), static_cast<long long>(steps_off));
      QVERIFY(drafts > 0);
      QVERIFY(accepted >= 0 && accepted <= drafts);
      // Each accepted draft is a token that needed no step of its own.
      QVERIFY(steps_on <= steps_off);
      if (k.params.is_greedy()) QVERIFY2(accepted > 0, "no draft accepted in greedy repetition");
    }
    LATHE_VERIFY_NO_LEAKS(off);
    LATHE_VERIFY_NO_LEAKS(on);
    QVERIFY(on.metrics().prometheus_text().find("lathe:spec_decode_num_accepted_tokens_total") !=
            std::string::npos);
  }

  // Drafts never take a sequence past max-model-len, preemption under a small cache recomputes a
  // sequence without its drafts, and the outputs stay those of a run without speculation.
  void max_model_len_and_preemption_with_drafts() {
    Options o;
    o.max_model_len = 64;  // 4 blocks of 16
    o.num_blocks = 9;      // about two sequences at full length
    auto engines = make_off_on(o, 5);
    LATHE_QVERIFY_RESULT(engines);
    Engine& off = *engines->off;
    Engine& on = *engines->on;
    SamplingParams p;
    p.temperature = 0.0f;
    p.max_tokens = 1000;  // clamped to max-model-len - prompt
    p.ignore_eos = true;
    const std::vector<RequestSpec> specs = specs_of(p, 8);
    const Outcome a = run_together(off, specs);
    const Outcome b = run_together(on, specs);
    QCOMPARE(a.tokens.size(), size_t{8});
    QCOMPARE(b.tokens, a.tokens);
    for (size_t i = 0; i < specs.size(); ++i) {
      QCOMPARE(b.tokens[i].size() + specs[i].prompt_tokens.size(), size_t{64});
      QCOMPARE(b.reasons[i], FinishReason::kLength);
    }
    const MetricsSnapshot m = on.metrics().snapshot();
    qInfo("%lld preemptions, %lld of %lld drafts accepted",
          static_cast<long long>(m.num_preemptions),
          static_cast<long long>(m.spec_decode_num_accepted_tokens),
          static_cast<long long>(m.spec_decode_num_draft_tokens));
    QVERIFY(m.num_preemptions > 0);
    QVERIFY(m.spec_decode_num_draft_tokens > 0);
    LATHE_VERIFY_NO_LEAKS(off);
    LATHE_VERIFY_NO_LEAKS(on);
  }

  // An abort lands at the step boundary even when the step carried drafts: the request ends with
  // reason abort, its usage counts what was delivered, and its blocks are free before the final
  // event.
  void abort_from_a_callback_with_drafts_in_flight() {
    Options o;
    o.num_speculative_tokens = 4;
    auto e = make_engine(o);
    LATHE_QVERIFY_RESULT(e);
    Engine& engine = *e.value();
    test::Collected c;
    auto inner = c.callback(&engine);
    RequestSpec s;
    s.prompt_tokens = repetitive_prompt(30, 1);
    s.sampling.temperature = 0.0f;
    s.sampling.max_tokens = 200;
    s.sampling.ignore_eos = true;
    LATHE_SUBMIT_OK(engine.submit(s, [&engine, inner](const StreamEvent& ev) {
      inner(ev);
      if (!ev.finished && ev.usage.completion_tokens == 5) engine.abort(ev.id);
    }));
    QVERIFY(c.wait());
    QCOMPARE(c.last.finish_reason, FinishReason::kAbort);
    QVERIFY(c.tokens.size() >= 5 && c.tokens.size() < 200);
    QCOMPARE(c.last.usage.completion_tokens, static_cast<int32_t>(c.tokens.size()));
    QCOMPARE(c.at_finish.kv_blocks_used, 0);
    LATHE_VERIFY_NO_LEAKS(engine);
  }

  void default_model_quotes_faster_with_the_same_text() {
    const std::string path = test::default_model_path();
    if (!std::filesystem::exists(path)) QSKIP("the default model is not in the cache");
    Options o;
    o.model = path;
    o.max_model_len = 512;
    o.prompt_lookup_min = 2;
    o.prompt_lookup_max = 4;
    auto engines = make_off_on(o, 4);
    LATHE_QVERIFY_RESULT(engines);
    RequestSpec s;
    s.messages = {{"user",
                   "Copy this sentence exactly: The quick brown fox jumps over the lazy dog "
                   "while the cat sleeps on the warm windowsill."}};
    s.sampling.temperature = 0.0f;
    s.sampling.max_tokens = 32;
    test::Collected a, b;
    LATHE_SUBMIT_OK(engines->off->submit(s, a.callback()));
    QVERIFY(a.wait());
    LATHE_SUBMIT_OK(engines->on->submit(s, b.callback()));
    QVERIFY(b.wait());
    QCOMPARE(b.tokens, a.tokens);
    QCOMPARE(b.text, a.text);
    const MetricsSnapshot on = engines->on->metrics().snapshot();
    const MetricsSnapshot off = engines->off->metrics().snapshot();
    qInfo("'%s': %lld of %lld drafts accepted; %lld steps with speculation, %lld without",
          b.text.c_str(), static_cast<long long>(on.spec_decode_num_accepted_tokens),
          static_cast<long long>(on.spec_decode_num_draft_tokens),
          static_cast<long long>(on.num_steps), static_cast<long long>(off.num_steps));
    QVERIFY2(b.text.find("windowsill") != std::string::npos, b.text.c_str());  // quoted
    QVERIFY(on.spec_decode_num_accepted_tokens > 0);
    QVERIFY(on.num_steps < off.num_steps);
    QCOMPARE(on.generation_tokens, off.generation_tokens);
    LATHE_VERIFY_NO_LEAKS(*engines->off);
    LATHE_VERIFY_NO_LEAKS(*engines->on);
  }
};

QTEST_GUILESS_MAIN(SpecDecodeIntegrationTest)
#include "spec_decode_integration_test.moc"
