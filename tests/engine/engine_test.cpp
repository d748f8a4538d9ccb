// The Engine API over a fake model runner (fake_runner.h): streaming, finish reasons, abort from
// any thread, shutdown with requests in flight, validation of bad input at submit, runner failures,
// idling without spinning, and the metrics a run leaves behind.
#include <QtTest>

#include <cmath>

#include <algorithm>
#include <ctime>
#include <memory>
#include <set>
#include <thread>

#include "engine/runtime/engine.h"
#include "engine/runtime/metrics.h"
#include "engine_test_util.h"
#include "fake_engine.h"
#include "test_support.h"

using namespace lathe;
using namespace std::chrono_literals;
using test::fake_model;
using test::Made;
using test::make_engine;
using test::prompt_of;
using test::spec;

class EngineTest : public QObject {
  Q_OBJECT
 private slots:
  void streams_every_token_and_ends_with_length() {
    Made m = make_engine();
    test::Collected c;
    auto id = m.engine->submit(spec(prompt_of(20), 6), c.callback(m.engine.get()));
    LATHE_QVERIFY_RESULT(id);
    QVERIFY(c.wait());
    QCOMPARE(c.tokens.size(), size_t{6});
    QCOMPARE(c.num_events, 6);  // one per token, the last one finished
    QCOMPARE(c.last.finish_reason, FinishReason::kLength);
    QCOMPARE(c.last.id, id.value());
    QCOMPARE(c.last.usage.prompt_tokens, 20);
    QCOMPARE(c.last.usage.completion_tokens, 6);
    QCOMPARE(c.timeline.token_times.size(), size_t{6});
    QVERIFY(c.timeline.arrival <= c.timeline.first_scheduled);
    QVERIFY(c.timeline.first_scheduled <= c.timeline.first_token);
    QVERIFY(c.timeline.first_token <= c.timeline.finished);
    // Greedy: each token is the fake model's function of the whole context.
    std::vector<TokenId> ctx = prompt_of(20);
    for (TokenId t : c.tokens) {
      QCOMPARE(t, m.runner->greedy_next(ctx));
      ctx.push_back(t);
    }
    QCOMPARE(c.at_finish.kv_blocks_used, 0);  // freed before the final event
    LATHE_VERIFY_NO_LEAKS(*m.engine);
  }

  // ModelInput::next_step_continues: set on decode steps whose sequences all go on (not on the
  // prefill, not on the step of the max_tokens-th token, not while a request waits), and every
  // such step's prediction (next_decode_input.h) is what the engine runs next when no token stops
  // a sequence; the fake runner checks it as a GPU runner's lookahead would.
  void next_step_hint_predicts_the_next_decode() {
    Made m = make_engine({}, 64, 1);  // one sequence at a time: the second request waits
    std::vector<test::Collected> cs(2);
    std::vector<StreamCallback> cbs;
    for (auto& c : cs) cbs.push_back(c.callback());
    auto ids = m.engine->submit_batch({spec(prompt_of(20, 0), 40), spec(prompt_of(7, 1), 5)}, cbs);
    LATHE_QVERIFY_RESULT(ids);
    for (auto& c : cs) QVERIFY(c.wait());
    const std::vector<bool> hints = m.runner->continues();
    // First request: 40 steps while the second waits: none may continue. Second: prefill, 3
    // decodes that continue, the 5th token's step.
    const std::vector<bool> second{false, true, true, true, false};
    QCOMPARE(hints.size(), size_t{45});
    QVERIFY(std::none_of(hints.begin(), hints.begin() + 40, [](bool b) { return b; }));
    QCOMPARE(std::vector<bool>(hints.begin() + 40, hints.end()), second);
    QCOMPARE(m.runner->lookahead_hits(), int64_t{3});
    QCOMPARE(m.runner->lookahead_misses(), int64_t{0});

    // Alone, a long request: every decode step but the last continues; predictions miss nothing
    // (at block boundaries there is none: the next block is not allocated yet).
    Made one = make_engine();
    test::Collected c;
    LATHE_QVERIFY_RESULT(one.engine->submit(spec(prompt_of(20), 50), c.callback(one.engine.get())));
    QVERIFY(c.wait());
    QCOMPARE(one.runner->lookahead_misses(), int64_t{0});
    QVERIFY2(one.runner->lookahead_hits() >= 40,
             qPrintable(QString::number(one.runner->lookahead_hits())));
    LATHE_VERIFY_NO_LEAKS(*one.engine);
  }

  void eos_stops_unless_ignored_or_before_min_tokens() {
    test::FakeRunnerOptions ro;
    ro.force_token_at = 2;  // every sequence samples EOS (2) as its third token
    Made m = make_engine(ro);
    test::Collected plain, ignoring, min_tokens;
    RequestSpec s = spec(prompt_of(5), 10);
    LATHE_SUBMIT_OK(m.engine->submit(s, plain.callback()));
    s.sampling.ignore_eos = true;
    LATHE_SUBMIT_OK(m.engine->submit(s, ignoring.callback()));
    s.sampling.ignore_eos = false;
    s.sampling.min_tokens = 4;  // EOS is banned for the first 4 tokens
    LATHE_SUBMIT_OK(m.engine->submit(s, min_tokens.callback()));
    QVERIFY(plain.wait() && ignoring.wait() && min_tokens.wait());
    QCOMPARE(plain.tokens.size(), size_t{3});
    QCOMPARE(plain.tokens.back(), TokenId{2});
    QCOMPARE(plain.last.finish_reason, FinishReason::kStop);
    QCOMPARE(plain.last.stop_reason, std::string("eos"));
    QCOMPARE(ignoring.tokens.size(), size_t{10});
    QCOMPARE(ignoring.last.finish_reason, FinishReason::kLength);
    QCOMPARE(min_tokens.tokens.size(), size_t{10});
    QVERIFY(std::find(min_tokens.tokens.begin(), min_tokens.tokens.end(), 2) ==
            min_tokens.tokens.end());
    LATHE_VERIFY_NO_LEAKS(*m.engine);
  }

  void abort_mid_stream_frees_blocks_and_ends_with_abort() {
    test::FakeRunnerOptions ro;
    ro.step_delay_ms = 20;  // about 4 s for the whole stream: time to abort it mid-way
    Made m = make_engine(ro);
    test::Collected c;
    auto id = m.engine->submit(spec(prompt_of(40), 200), c.callback(m.engine.get()));
    LATHE_QVERIFY_RESULT(id);
    QVERIFY(c.wait_tokens(3));
    QVERIFY(m.engine->metrics().snapshot().kv_blocks_used > 0);
    std::thread([&] { m.engine->abort(id.value()); }).join();  // from another thread
    QVERIFY(c.wait());
    QCOMPARE(c.last.finish_reason, FinishReason::kAbort);
    QVERIFY(c.tokens.size() < 200);
    QCOMPARE(c.at_finish.kv_blocks_used, 0);
    QCOMPARE(c.at_finish.num_requests_running, 0);
    m.engine->abort(id.value());  // finished ids are ignored
    m.engine->abort(999999);      // unknown ids too
    LATHE_VERIFY_NO_LEAKS(*m.engine);
    QCOMPARE(m.engine->metrics().snapshot().requests_finished_abort, int64_t{1});
  }

  void aborting_a_queued_request_removes_it() {
    test::FakeRunnerOptions ro;
    ro.step_delay_ms = 10;
    Made m = make_engine(ro, 64, /*seqs=*/1);
    test::Collected running, queued;
    LATHE_SUBMIT_OK(m.engine->submit(spec(prompt_of(10), 100), running.callback()));
    auto q = m.engine->submit(spec(prompt_of(10, 1), 30), queued.callback());
    LATHE_QVERIFY_RESULT(q);
    QVERIFY(running.wait_tokens(2));
    QCOMPARE(m.engine->metrics().snapshot().num_requests_waiting, 1);
    m.engine->abort(q.value());
    QVERIFY(queued.wait());
    QCOMPARE(queued.last.finish_reason, FinishReason::kAbort);
    QVERIFY(queued.tokens.empty());
    QCOMPARE(m.engine->metrics().snapshot().num_requests_waiting, 0);
    QVERIFY(running.wait());
    QCOMPARE(running.tokens.size(), size_t{100});  // undisturbed
    LATHE_VERIFY_NO_LEAKS(*m.engine);
  }

  void abort_from_inside_a_callback() {
    Made m = make_engine();
    test::Collected c;
    Engine* engine = m.engine.get();
    auto inner = c.callback();
    LATHE_SUBMIT_OK(
        m.engine->submit(spec(prompt_of(8), 100), [engine, inner](const StreamEvent& e) {
          inner(e);
          if (!e.finished && e.usage.completion_tokens == 2) engine->abort(e.id);
        }));
    QVERIFY(c.wait());
    QCOMPARE(c.last.finish_reason, FinishReason::kAbort);
    QVERIFY(c.tokens.size() <= 4);
    LATHE_VERIFY_NO_LEAKS(*m.engine);
  }

  void shutdown_ends_in_flight_requests_with_abort() {
    test::FakeRunnerOptions ro;
    ro.step_delay_ms = 10;
    Made m = make_engine(ro, 64, 2);
    std::vector<std::unique_ptr<test::Collected>> cs;
    for (int i = 0; i < 5; ++i) {
      cs.push_back(std::make_unique<test::Collected>());
      LATHE_SUBMIT_OK(m.engine->submit(spec(prompt_of(10, i), 1000), cs.back()->callback()));
    }
    QVERIFY(cs[0]->wait_tokens(2));
    m.engine->shutdown();
    for (auto& c : cs) {
      QVERIFY(c->finished);  // delivered before shutdown() returned
      QCOMPARE(c->last.finish_reason, FinishReason::kAbort);
    }
    QCOMPARE(m.engine->num_unfinished_requests(), 0);
    m.engine->shutdown();  // idempotent
    test::Collected late;
    auto r = m.engine->submit(spec(prompt_of(4), 4), late.callback());
    QVERIFY(!r.is_ok());
    QCOMPARE(r.status().code(), ErrorCode::kCancelled);
    QCOMPARE(late.num_events, 0);
  }

  void bad_input_is_rejected_without_disturbing_running_requests() {
    test::FakeRunnerOptions ro;
    ro.step_delay_ms = 1;
    Made m = make_engine(ro, /*blocks=*/64, 8, 64, /*with_tokenizer=*/false);
    test::Collected running;
    LATHE_SUBMIT_OK(m.engine->submit(spec(prompt_of(30), 40), running.callback()));
    QVERIFY(running.wait_tokens(1));

    struct Case {
      const char* name;
      RequestSpec spec;
      const char* message_part;
    };
    std::vector<Case> cases;
    cases.push_back({"empty", RequestSpec{}, "prompt is empty"});
    {
      RequestSpec s = spec(prompt_of(4), 4);
      s.prompt = "text too";
      cases.push_back({"two forms", s, "exactly one"});
    }
    cases.push_back({"id outside vocab", spec({5, 1000}, 4), "outside the vocabulary"});
    cases.push_back({"negative id", spec({-1}, 4), "outside the vocabulary"});
    {
      RequestSpec s;
      s.prompt = "hello";
      cases.push_back({"text without tokenizer", s, "no tokenizer"});
    }
    cases.push_back({"longer than max-model-len", spec(prompt_of(256), 4), "max-model-len is 256"});
    cases.push_back({"huge", spec(prompt_of(100000), 4), "max-model-len"});
    auto with = [&](auto mutate) {
      RequestSpec s = spec(prompt_of(4), 4);
      mutate(s.sampling);
      return s;
    };
    cases.push_back({"top_p", with([](SamplingParams& p) { p.top_p = 1.5f; }), "top_p"});
    cases.push_back(
        {"temperature", with([](SamplingParams& p) { p.temperature = -1.0f; }), "temperature"});
    cases.push_back(
        {"nan temperature", with([](SamplingParams& p) { p.temperature = NAN; }), "temperature"});
    cases.push_back(
        {"max_tokens", with([](SamplingParams& p) { p.max_tokens = 0; }), "max_tokens"});
    cases.push_back(
        {"min_tokens", with([](SamplingParams& p) { p.min_tokens = 10; }), "min_tokens"});
    cases.push_back({"top_k", with([](SamplingParams& p) { p.top_k = -5; }), "top_k"});
    cases.push_back({"min_p", with([](SamplingParams& p) { p.min_p = 2.0f; }), "min_p"});
    cases.push_back({"repetition", with([](SamplingParams& p) { p.repetition_penalty = 0.0f; }),
                     "repetition_penalty"});
    cases.push_back({"presence", with([](SamplingParams& p) { p.presence_penalty = 3.0f; }),
                     "presence_penalty"});
    cases.push_back({"frequency", with([](SamplingParams& p) { p.frequency_penalty = -3.0f; }),
                     "frequency_penalty"});
    cases.push_back({"empty stop", with([](SamplingParams& p) { p.stop = {""}; }), "stop strings"});
    cases.push_back(
        {"stop id", with([](SamplingParams& p) { p.stop_token_ids = {5000}; }), "stop_token_ids"});
    cases.push_back({"logprobs", with([](SamplingParams& p) { p.logprobs = 100; }), "logprobs"});
    for (const Case& k : cases) {
      test::Collected c;
      auto r = m.engine->submit(k.spec, c.callback());
      QVERIFY2(!r.is_ok(), k.name);
      QCOMPARE(r.status().code(), ErrorCode::kInvalidArgument);
      QVERIFY2(r.status().message().find(k.message_part) != std::string::npos,
               qPrintable(QString("%1: %2").arg(k.name, r.status().message().c_str())));
      QCOMPARE(c.num_events, 0);
    }
    QVERIFY(running.wait());
    QCOMPARE(running.tokens.size(), size_t{40});
    std::vector<TokenId> ctx = prompt_of(30);
    for (TokenId t : running.tokens) {
      QCOMPARE(t, m.runner->greedy_next(ctx));
      ctx.push_back(t);
    }
    LATHE_VERIFY_NO_LEAKS(*m.engine);
  }

  void a_prompt_larger_than_the_cache_is_rejected() {
    Made m = make_engine({}, /*blocks=*/16);  // 256 tokens: exactly one max-model-len sequence
    auto r = m.engine->submit(spec(prompt_of(255), 4), nullptr);
    LATHE_QVERIFY_RESULT(r);  // fits, just
    QVERIFY(test::wait_idle(*m.engine));
    EngineConfig c;
    c.cache.num_gpu_blocks_override = 8;  // 128 tokens < max-model-len 256: refused at create
    auto e = Engine::create_with_runner(c, fake_model(), std::make_unique<test::FakeModelRunner>());
    QVERIFY(!e.is_ok());
    QVERIFY2(e.status().message().find("use --max-model-len <= 128") != std::string::npos,
             e.status().message().c_str());
  }

  void a_full_queue_answers_resource_exhausted() {
    test::FakeRunnerOptions ro;
    ro.step_delay_ms = 20;
    Made m = make_engine(ro, 64, /*seqs=*/1, 64, false, /*max_waiting=*/2);
    std::vector<std::unique_ptr<test::Collected>> cs;
    int accepted = 0, refused = 0;
    for (int i = 0; i < 6; ++i) {
      cs.push_back(std::make_unique<test::Collected>());
      auto r = m.engine->submit(spec(prompt_of(4, i), 20), cs.back()->callback());
      if (r.is_ok()) {
        ++accepted;
      } else {
        QCOMPARE(r.status().code(), ErrorCode::kResourceExhausted);
        QVERIFY(r.status().message().find("retry later") != std::string::npos);
        ++refused;
      }
    }
    QVERIFY(refused > 0);
    QVERIFY(accepted >= 2);
    LATHE_VERIFY_NO_LEAKS(*m.engine);
    for (auto& c : cs)
      if (c->num_events > 0) QCOMPARE(c->tokens.size(), size_t{20});
  }

  void a_runner_failure_ends_the_step_with_errors_and_the_engine_goes_on() {
    test::FakeRunnerOptions ro;
    ro.fail_at_step = 3;
    Made m = make_engine(ro);
    test::Collected a, b;  // together in every step, so both are in the failing one
    LATHE_SUBMIT_OK(m.engine->submit_batch({spec(prompt_of(10), 10), spec(prompt_of(10, 1), 10)},
                                           {a.callback(), b.callback()}));
    QVERIFY(a.wait() && b.wait());
    QCOMPARE(a.last.finish_reason, FinishReason::kError);
    QVERIFY(a.last.error.find("injected failure") != std::string::npos);
    QCOMPARE(b.last.finish_reason, FinishReason::kError);
    test::Collected after;
    LATHE_SUBMIT_OK(m.engine->submit(spec(prompt_of(10), 5), after.callback()));
    QVERIFY(after.wait());
    QCOMPARE(after.last.finish_reason, FinishReason::kLength);
    QCOMPARE(m.engine->metrics().snapshot().requests_finished_error, int64_t{2});
    LATHE_VERIFY_NO_LEAKS(*m.engine);
  }

  // An exception from the runner (std::bad_alloc here; a third-party kernel library's exception on
  // a GPU) is the step's error, not the process's end: the step's requests finish with an error
  // that says what happened and the engine serves the next request.
  void a_runner_exception_ends_the_step_with_errors_and_the_engine_goes_on() {
    test::FakeRunnerOptions ro;
    ro.throw_at_step = 2;
    Made m = make_engine(ro);
    test::Collected a;
    LATHE_SUBMIT_OK(m.engine->submit(spec(prompt_of(10), 10), a.callback()));
    QVERIFY(a.wait());
    QCOMPARE(a.last.finish_reason, FinishReason::kError);
    QVERIFY2(a.last.error.find("the model step ran out of host memory") != std::string::npos,
             a.last.error.c_str());
    test::Collected after;
    LATHE_SUBMIT_OK(m.engine->submit(spec(prompt_of(10), 5), after.callback()));
    QVERIFY(after.wait());
    QCOMPARE(after.last.finish_reason, FinishReason::kLength);
    QCOMPARE(m.engine->metrics().snapshot().requests_finished_error, int64_t{1});
    LATHE_VERIFY_NO_LEAKS(*m.engine);
  }

  void a_throwing_callback_does_not_stop_the_engine() {
    Made m = make_engine();
    LATHE_SUBMIT_OK(m.engine->submit(spec(prompt_of(5), 3),
                                     [](const StreamEvent&) { throw std::runtime_error("boom"); }));
    test::Collected c;
    LATHE_SUBMIT_OK(m.engine->submit(spec(prompt_of(5), 3), c.callback()));
    QVERIFY(c.wait());
    LATHE_VERIFY_NO_LEAKS(*m.engine);
  }

  void idles_without_spinning() {
    Made m = make_engine();
    test::Collected c;
    LATHE_SUBMIT_OK(m.engine->submit(spec(prompt_of(5), 3), c.callback()));
    QVERIFY(c.wait());
    QVERIFY(test::wait_idle(*m.engine));
    const int64_t steps = m.runner->num_steps();
    const std::clock_t cpu0 = std::clock();
    std::this_thread::sleep_for(300ms);
    const double cpu_ms = 1000.0 * static_cast<double>(std::clock() - cpu0) / CLOCKS_PER_SEC;
    QCOMPARE(m.runner->num_steps(), steps);
    QVERIFY2(cpu_ms < 30.0, qPrintable(QString("%1 ms of CPU while idle").arg(cpu_ms)));
  }

  void max_tokens_is_clamped_to_the_context() {
    Made m = make_engine();
    test::Collected c;
    LATHE_SUBMIT_OK(m.engine->submit(spec(prompt_of(250), 100), c.callback()));
    QVERIFY(c.wait());
    QCOMPARE(c.tokens.size(), size_t{6});  // 250 + 6 = max-model-len 256
    QCOMPARE(c.last.finish_reason, FinishReason::kLength);
  }

  // Prompt logprobs (echo): every prompt token scored by the model's logits after the tokens
  // before it, read through KV blocks borrowed for the call (the fake runner's one-hot logits sit
  // at the token its context predicts), in two chunks; the blocks are back afterwards.
  void prompt_logprobs_score_each_token_by_its_prefix() {
    Made m = make_engine();
    std::vector<TokenId> p = {5};
    for (int i = 1; i < 100; ++i)
      p.push_back(i % 2 == 1 ? m.runner->greedy_next(p) : static_cast<TokenId>(3 + (i * 37) % 900));
    RequestSpec s = spec(p, 2);
    s.sampling.prompt_logprobs = 2;
    std::vector<SampledToken> got;
    int events_with = 0;
    test::Collected c;
    StreamCallback inner = c.callback(m.engine.get());
    LATHE_SUBMIT_OK(m.engine->submit(s, [&](const StreamEvent& e) {
      if (!e.prompt_logprobs.empty()) {
        got = e.prompt_logprobs;
        ++events_with;
      }
      inner(e);
    }));
    QVERIFY(c.wait());
    QCOMPARE(events_with, 1);
    QCOMPARE(got.size(), p.size());
    QVERIFY(std::isnan(got[0].logprob) && got[0].token == p[0]);
    const double log_sum = std::log(std::exp(1.0) + 999.0);  // one logit of 1, 999 of 0
    for (size_t i = 1; i < p.size(); ++i) {
      const std::vector<TokenId> prefix(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(i));
      const TokenId predicted = m.runner->greedy_next(prefix);
      QCOMPARE(got[i].token, p[i]);
      const double want = (p[i] == predicted ? 1.0 : 0.0) - log_sum;
      QVERIFY2(std::abs(got[i].logprob - want) < 1e-5, std::to_string(i).c_str());
      QCOMPARE(static_cast<int>(got[i].top_logprobs.size()), 2);
      QCOMPARE(got[i].top_logprobs[0].token, predicted);
    }
    QCOMPARE(c.at_finish.kv_blocks_used, 0);
  }

  void seeds_make_sampling_reproducible() {
    Made m = make_engine();
    auto run = [&](std::optional<uint64_t> seed) {
      RequestSpec s = spec(prompt_of(6), 12);
      s.sampling.temperature = 1.0f;
      s.sampling.seed = seed;
      test::Collected c;
      (void)m.engine->submit(s, c.callback());
      c.wait();
      return c.tokens;
    };
    QCOMPARE(run(7), run(7));
    QVERIFY(run(7) != run(8));
    QVERIFY(run(std::nullopt) != run(std::nullopt));  // unseeded: a random seed each
  }

  void text_prompts_and_chat_go_through_the_tokenizer_and_template() {
    Made m = make_engine({}, 64, 8, 64, /*with_tokenizer=*/true);
    RequestSpec text;
    text.prompt = "abc";
    auto ids = m.engine->tokenize(text);
    LATHE_QVERIFY_RESULT(ids);
    QCOMPARE(ids->size(), size_t{3});
    RequestSpec chat;
    chat.messages = {{"system", "ab"}, {"user", "cd"}};
    auto chat_ids = m.engine->tokenize(chat);
    LATHE_QVERIFY_RESULT(chat_ids);
    QCOMPARE(chat_ids->size(), size_t{4});  // the template concatenates the contents
    chat.sampling.max_tokens = 3;
    test::Collected c;
    LATHE_SUBMIT_OK(m.engine->submit(chat, c.callback()));
    QVERIFY(c.wait());
    QCOMPARE(c.tokens.size(), size_t{3});
    QVERIFY(!c.text.empty());  // detokenized
    LATHE_VERIFY_NO_LEAKS(*m.engine);
  }

  void a_batch_is_submitted_all_or_none() {
    Made m = make_engine();
    std::vector<test::Collected> cs(4);
    std::vector<RequestSpec> specs{spec(prompt_of(5, 0), 3), spec(prompt_of(5, 1), 3),
                                   spec({5, 5000}, 3), spec(prompt_of(5, 3), 3)};
    std::vector<StreamCallback> cbs;
    for (auto& c : cs) cbs.push_back(c.callback());
    auto bad = m.engine->submit_batch(specs, cbs);
    QVERIFY(!bad.is_ok());
    QVERIFY2(bad.status().message().find("request 2") != std::string::npos,
             bad.status().message().c_str());
    QCOMPARE(m.engine->num_unfinished_requests(), 0);
    specs[2] = spec(prompt_of(5, 2), 3);
    auto ids = m.engine->submit_batch(specs, cbs);
    LATHE_QVERIFY_RESULT(ids);
    QCOMPARE(ids->size(), size_t{4});
    for (auto& c : cs) {
      QVERIFY(c.wait());
      QCOMPARE(c.tokens.size(), size_t{3});
    }
    LATHE_VERIFY_NO_LEAKS(*m.engine);
  }

  void chat_template_problems_are_reported_at_submit() {
    RequestSpec chat;
    chat.messages = {{"user", "hi"}};
    for (const char* tmpl : {"", "{{ raise_exception('Conversation roles must alternate') }}",
                             "{% for m in messages %}"}) {
      EngineConfig c;
      c.device.device = DeviceKind::kCpu;
      c.cache.num_gpu_blocks_override = 64;
      LoadedModel model = fake_model(/*with_tokenizer=*/true);
      model.chat_template = tmpl;
      auto e = Engine::create_with_runner(c, std::move(model),
                                          std::make_unique<test::FakeModelRunner>());
      LATHE_QVERIFY_RESULT(e);
      test::Collected col;
      auto r = e.value()->submit(chat, col.callback());
      QVERIFY(!r.is_ok());
      QCOMPARE(col.num_events, 0);
      const std::string msg = r.status().message();
      if (std::string(tmpl).empty())
        QVERIFY2(msg.find("--chat-template") != std::string::npos, msg.c_str());
      if (std::string(tmpl).find("raise") != std::string::npos)
        QVERIFY2(msg.find("Conversation roles must alternate") != std::string::npos, msg.c_str());
      RequestSpec plain;
      plain.prompt = "abc";  // plain prompts still work
      plain.sampling.max_tokens = 2;
      test::Collected ok;
      LATHE_SUBMIT_OK(e.value()->submit(plain, ok.callback()));
      QVERIFY(ok.wait());
    }
  }

  void many_threads_submit_at_once() {
    Made m = make_engine({}, 128, 16, 128);
    std::mutex mu;
    std::set<RequestId> ids;
    std::vector<std::unique_ptr<test::Collected>> cs(64);
    for (auto& c : cs) c = std::make_unique<test::Collected>();
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 8; ++i) {
          const int k = t * 8 + i;
          auto r = m.engine->submit(spec(prompt_of(5 + k % 20, k), 4 + k % 5), cs[k]->callback());
          std::lock_guard<std::mutex> lock(mu);
          if (r.is_ok()) ids.insert(r.value());
        }
      });
    }
    for (auto& th : threads) th.join();
    QCOMPARE(ids.size(), size_t{64});
    for (int k = 0; k < 64; ++k) {
      QVERIFY(cs[k]->wait());
      QCOMPARE(cs[k]->tokens.size(), size_t(4 + k % 5));
    }
    LATHE_VERIFY_NO_LEAKS(*m.engine);
    const MetricsSnapshot s = m.engine->metrics().snapshot();
    QCOMPARE(s.requests_finished_length, int64_t{64});
    QCOMPARE(s.ttft_points.size(), size_t{64});
    QCOMPARE(s.finished.size(), size_t{64});
    int64_t gen = 0;
    for (int k = 0; k < 64; ++k) gen += 4 + k % 5;
    QCOMPARE(s.generation_tokens, gen);
    QCOMPARE(s.ttft_s.count, uint64_t{64});
    QCOMPARE(s.itl_s.count, uint64_t(gen - 64));
  }
};

QTEST_GUILESS_MAIN(EngineTest)
#include "engine_test.moc"
