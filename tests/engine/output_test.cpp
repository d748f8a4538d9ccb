// The pieces between the scheduler and the stream: stop strings over streamed text, the output
// processor (EOS, stop ids, stop strings, length, min_tokens, UTF-8 held back), sampling rows
// (penalty history only when needed, banned end tokens before min_tokens), ModelInput flattening,
// and the engine's config resolution and KV plan.
#include <QtTest>

#include "engine/runtime/engine_setup.h"
#include "engine/runtime/model_input_builder.h"
#include "engine/runtime/next_decode_input.h"
#include "engine/runtime/output_processor.h"
#include "engine/runtime/runner_factory.h"
#include "engine/runtime/stop_strings.h"
#include "fake_tokenizer.h"
#include "test_support.h"

using namespace lathe;

namespace {

std::string stream(OutputProcessor& p, const std::vector<TokenId>& tokens, OutputDelta* last) {
  std::string text;
  for (TokenId t : tokens) {
    *last = p.add_token(t);
    text += last->text;
    if (last->finished) break;
  }
  return text;
}

SamplingParams params(int max_tokens) {
  SamplingParams p;
  p.max_tokens = max_tokens;
  return p;
}

}  // namespace

class OutputTest : public QObject {
  Q_OBJECT
 private slots:
  void stop_strings_hold_back_possible_prefixes() {
    StopStringMatcher m({"STOP", "\n\n"});
    auto r = m.add("Hello ST");
    QCOMPARE(r.text, std::string("Hello "));  // "ST" may start STOP
    QVERIFY(!r.matched);
    r = m.add("ART");
    QCOMPARE(r.text, std::string("START"));  // it did not
    r = m.add("ok\n");
    QCOMPARE(r.text, std::string("ok"));
    r = m.add("\nmore");
    QVERIFY(r.matched);
    QCOMPARE(r.stop, std::string("\n\n"));
    QCOMPARE(r.text, std::string(""));
    StopStringMatcher first({"bc", "ab"});
    r = first.add("xabc");
    QVERIFY(r.matched);
    QCOMPARE(r.stop, std::string("ab"));  // the earliest match wins
    QCOMPARE(r.text, std::string("x"));
    StopStringMatcher none({});
    QCOMPARE(none.add("abc").text, std::string("abc"));
    StopStringMatcher unchecked({"b"});
    QCOMPARE(unchecked.add("abc", /*check=*/false).text, std::string("abc"));
    StopStringMatcher tail({"xyz"});
    QCOMPARE(tail.add("axy").text, std::string("a"));
    QCOMPARE(tail.flush(), std::string("xy"));
  }

  void text_streams_and_length_ends_it() {
    OutputProcessor p(std::make_shared<test::FakeTokenizer>(), params(3), {2});
    OutputDelta last;
    const std::string text = stream(p, {5, 6, 7, 8}, &last);
    QCOMPARE(text, std::string(" w5 w6 w7"));
    QVERIFY(last.finished);
    QCOMPARE(last.reason, FinishReason::kLength);
    QCOMPARE(p.num_output_tokens(), 3);
  }

  void eos_ends_with_stop_and_adds_no_text() {
    OutputProcessor p(std::make_shared<test::FakeTokenizer>(), params(10), {2});
    OutputDelta last;
    QCOMPARE(stream(p, {5, 2, 6}, &last), std::string(" w5"));
    QCOMPARE(last.reason, FinishReason::kStop);
    QCOMPARE(last.stop_reason, std::string("eos"));
    QCOMPARE(p.num_output_tokens(), 2);
    QCOMPARE(p.end_token_ids(), std::vector<TokenId>{2});
  }

  void ignore_eos_and_stop_token_ids() {
    SamplingParams sp = params(10);
    sp.ignore_eos = true;
    sp.stop_token_ids = {7};
    OutputProcessor p(std::make_shared<test::FakeTokenizer>(), sp, {2});
    QCOMPARE(p.end_token_ids(), std::vector<TokenId>{7});
    OutputDelta last;
    QCOMPARE(stream(p, {5, 2, 6, 7, 8}, &last), std::string(" w5 w6"));
    QCOMPARE(last.reason, FinishReason::kStop);
    QCOMPARE(last.stop_reason, std::string("7"));
  }

  void stop_strings_cut_the_text_and_count_after_min_tokens() {
    SamplingParams sp = params(20);
    sp.stop = {"STOP"};
    OutputProcessor p(std::make_shared<test::FakeTokenizer>(), sp, {2});
    OutputDelta last;
    QCOMPARE(stream(p, {5, 103, 6}, &last), std::string(" w5 "));
    QCOMPARE(last.reason, FinishReason::kStop);
    QCOMPARE(last.stop_reason, std::string("STOP"));

    sp.min_tokens = 3;  // a stop string among the first 3 tokens does not count
    OutputProcessor q(std::make_shared<test::FakeTokenizer>(), sp, {2});
    QCOMPARE(stream(q, {103, 5, 6, 103}, &last), std::string(" STOP w5 w6 "));
    QCOMPARE(last.stop_reason, std::string("STOP"));
  }

  void incomplete_utf8_is_held_back_until_complete() {
    OutputProcessor p(std::make_shared<test::FakeTokenizer>(), params(10), {2});
    QCOMPARE(p.add_token(100).text, std::string());
    QCOMPARE(p.add_token(101).text, std::string("\xc3\xa9"));
    // Cut off mid-character by the length limit: the stray byte becomes U+FFFD, never lost.
    OutputProcessor q(std::make_shared<test::FakeTokenizer>(), params(2), {2});
    QCOMPARE(q.add_token(102).text, std::string("!"));
    const OutputDelta d = q.add_token(100);
    QVERIFY(d.finished);
    QCOMPARE(d.text, std::string("\xef\xbf\xbd"));
  }

  void without_a_tokenizer_only_ids_stream() {
    OutputProcessor p(nullptr, params(2), {2});
    QCOMPARE(p.add_token(5).text, std::string());
    QCOMPARE(p.add_token(6).reason, FinishReason::kLength);
  }

  void sampling_rows_carry_history_only_with_penalties() {
    SamplingParams sp = params(10);
    sp.min_tokens = 2;
    const std::vector<TokenId> tokens{10, 11, 12, 13};  // 3 prompt + 1 output
    const std::vector<TokenId> stops{2, 7};
    SamplingRowInput in{&sp, 42, tokens, 3, stops};
    SamplingRow row = make_sampling_row(in);
    QCOMPARE(row.seed, uint64_t{42});
    QCOMPARE(row.step, uint64_t{1});
    QVERIFY(row.history_tokens.empty());
    QCOMPARE(row.banned_tokens, stops);  // 1 output < min_tokens 2
    sp.presence_penalty = 0.5f;
    row = make_sampling_row(in);
    QCOMPARE(row.history_tokens, tokens);
    QCOMPARE(row.history_prompt_len, 3);
    const std::vector<TokenId> longer{10, 11, 12, 13, 14};
    in.tokens = longer;
    row = make_sampling_row(in);
    QVERIFY(row.banned_tokens.empty());  // min_tokens reached
  }

  void model_input_flattens_tokens_slots_and_tables() {
    SchedulerOutput out;
    ScheduledSequence a;  // a prefill chunk: positions 16..19 of a prompt of 24
    a.id = 1;
    a.num_computed_tokens = 16;
    a.num_new_tokens = 4;
    a.num_prompt_tokens = 24;
    a.token_ids = {5, 6, 7, 8};
    a.block_table = {3, 9};
    ScheduledSequence b;  // a decode at position 5
    b.id = 2;
    b.num_computed_tokens = 5;
    b.num_new_tokens = 1;
    b.num_prompt_tokens = 3;
    b.sample = true;
    b.token_ids = {42};
    b.block_table = {4};
    out.seqs = {a, b};
    out.num_batched_tokens = 5;
    const ModelInput in = build_model_input(out, 16);
    QCOMPARE(in.token_ids, (std::vector<TokenId>{5, 6, 7, 8, 42}));
    QCOMPARE(in.positions, (std::vector<int32_t>{16, 17, 18, 19, 5}));
    QCOMPARE(in.slot_mapping,
             (std::vector<int64_t>{9 * 16, 9 * 16 + 1, 9 * 16 + 2, 9 * 16 + 3, 4 * 16 + 5}));
    QCOMPARE(in.query_start, (std::vector<int32_t>{0, 4, 5}));
    QCOMPARE(in.seq_lens, (std::vector<int32_t>{20, 6}));
    QCOMPARE(in.max_blocks_per_seq, 2);
    QCOMPARE(in.block_tables, (std::vector<int32_t>{3, 9, 4, 0}));
    QCOMPARE(in.sample_seqs, std::vector<int32_t>{1});
    QCOMPARE(in.max_query_len, 4);
    QCOMPARE(in.max_seq_len, 20);
    QCOMPARE(out.seqs[0].num_new_prompt_tokens(), 4);
    QCOMPARE(out.seqs[1].num_new_prompt_tokens(), 0);
  }

  // The step after a decode-only step (next_decode_input.h): one position further in the same
  // blocks, token ids left for the runner, sampling steps + 1; refused where it cannot be known.
  void next_decode_input_is_predicted_or_refused() {
    SchedulerOutput out;
    for (int i = 0; i < 2; ++i) {
      ScheduledSequence s;  // decodes at positions 5 and 20
      s.id = i + 1;
      s.num_computed_tokens = i == 0 ? 5 : 20;
      s.num_new_tokens = 1;
      s.num_prompt_tokens = 3;
      s.sample = true;
      s.token_ids = {static_cast<TokenId>(40 + i)};
      s.block_table = i == 0 ? std::vector<int32_t>{4} : std::vector<int32_t>{7, 2};
      out.seqs.push_back(s);
    }
    out.num_batched_tokens = 2;
    ModelInput in = build_model_input(out, 16);
    in.sampling.resize(2);
    in.sampling[0].step = 3;
    in.sampling[1].step = 18;
    in.sampling[1].banned_tokens = {2};
    in.next_step_continues = true;
    const std::optional<ModelInput> next = predict_next_decode(in, 16);
    QVERIFY(next.has_value());
    QCOMPARE(next->token_ids, (std::vector<TokenId>{0, 0}));
    QCOMPARE(next->positions, (std::vector<int32_t>{6, 21}));
    QCOMPARE(next->slot_mapping, (std::vector<int64_t>{4 * 16 + 6, 2 * 16 + 5}));
    QCOMPARE(next->seq_lens, (std::vector<int32_t>{7, 22}));
    QCOMPARE(next->max_seq_len, 22);
    QCOMPARE(next->block_tables, in.block_tables);
    QCOMPARE(next->query_start, in.query_start);
    QCOMPARE(next->sample_seqs, in.sample_seqs);
    QCOMPARE(next->sampling[0].step, uint64_t{4});
    QCOMPARE(next->sampling[1].step, uint64_t{19});
    QCOMPARE(next->sampling[1].banned_tokens, std::vector<TokenId>{2});

    // same_step: every field but the hint; the engine's real next step matches once the tokens
    // are known.
    ModelInput real = *next;
    real.token_ids = {77, 78};
    real.next_step_continues = false;
    ModelInput guess = *next;
    guess.token_ids = {77, 78};
    QVERIFY(same_step(real, guess));
    guess.token_ids[1] = 79;
    QVERIFY(!same_step(real, guess));
    guess = real;
    guess.sampling[0].temperature = 0.5f;
    QVERIFY(!same_step(real, guess));

    // Late-bound sampling rows (constrained decoding): a predicted step with a mask has
    // constrained rows; the real next step's mask differs (it follows from the token just
    // sampled), so same_step refuses it while same_forward takes it; same_forward still refuses
    // any difference in what the forward pass reads or in which rows are sampled.
    QVERIFY(!has_constrained_rows(real));
    ModelInput constrained = real;
    constrained.sampling[1].allowed = std::make_shared<TokenMask>(TokenMask{0x1u, 0x0u});
    QVERIFY(has_constrained_rows(constrained));
    QVERIFY(same_step(constrained, constrained));
    ModelInput next_mask = constrained;
    next_mask.sampling[1].allowed = std::make_shared<TokenMask>(TokenMask{0x2u, 0x0u});
    next_mask.sampling[1].banned_tokens.clear();  // min_tokens yielding to a complete grammar
    QVERIFY(!same_step(constrained, next_mask));
    QVERIFY(same_forward(constrained, next_mask));
    // The same words in another vector are the same mask.
    ModelInput same_mask = constrained;
    same_mask.sampling[1].allowed = std::make_shared<TokenMask>(TokenMask{0x1u, 0x0u});
    QVERIFY(same_step(constrained, same_mask));
    ModelInput other = next_mask;
    other.token_ids[0] = 76;
    QVERIFY(!same_forward(constrained, other));
    other = next_mask;
    other.slot_mapping[1] += 1;
    QVERIFY(!same_forward(constrained, other));
    other = next_mask;
    other.sample_seqs = {0};
    other.sampling.resize(1);
    QVERIFY(!same_forward(constrained, other));
    other = next_mask;
    other.sampling.push_back(SamplingRow{});
    QVERIFY(!same_forward(constrained, other));

    // Refused: the next position opens a block (15 -> 16), a prefill token, an unsampled sequence,
    // penalty history, no sequence.
    ModelInput edge = in;
    edge.positions[0] = 15;
    QVERIFY(!predict_next_decode(edge, 16).has_value());
    ModelInput prefill = in;
    prefill.token_ids.push_back(9);
    prefill.positions.push_back(21);
    prefill.slot_mapping.push_back(2 * 16 + 5);
    prefill.query_start.back() = 3;
    QVERIFY(!predict_next_decode(prefill, 16).has_value());
    ModelInput unsampled = in;
    unsampled.sample_seqs = {0};
    unsampled.sampling.resize(1);
    QVERIFY(!predict_next_decode(unsampled, 16).has_value());
    ModelInput history = in;
    history.sampling[0].history_tokens = {1, 2, 3};
    QVERIFY(!predict_next_decode(history, 16).has_value());
    QVERIFY(!predict_next_decode(ModelInput{}, 16).has_value());
  }

  void config_defaults_resolve_per_device() {
    ModelConfig m;
    m.max_position_embeddings = 8192;
    m.name = "SmolLM2";
    EngineConfig c;
    auto cpu = resolve_engine_config(c, m, DeviceKind::kCpu);
    LATHE_QVERIFY_RESULT(cpu);
    QCOMPARE(cpu->scheduler.max_model_len, 8192);
    QCOMPARE(cpu->scheduler.max_num_seqs, 64);
    QCOMPARE(cpu->scheduler.max_num_batched_tokens, 512);
    QCOMPARE(cpu->served_model_name, std::string("SmolLM2"));
    auto gpu = resolve_engine_config(c, m, DeviceKind::kCuda);
    QCOMPARE(gpu->scheduler.max_num_seqs, 256);
    QCOMPARE(gpu->scheduler.max_num_batched_tokens, 8192);
    c.scheduler.max_model_len = 10000;
    auto too_long = resolve_engine_config(c, m, DeviceKind::kCpu);
    QVERIFY(!too_long.is_ok());
    QVERIFY(too_long.status().message().find("--max-model-len <= 8192") != std::string::npos);
    c.scheduler.max_model_len = 0;
    c.scheduler.max_num_seqs = 32;
    c.scheduler.max_num_batched_tokens = 16;
    auto small_budget = resolve_engine_config(c, m, DeviceKind::kCpu);
    QVERIFY(!small_budget.is_ok());
    QVERIFY(small_budget.status().message().find("--max-num-batched-tokens") != std::string::npos);
    c.scheduler.max_num_batched_tokens = 0;
    c.scheduler.enable_chunked_prefill = false;
    QCOMPARE(resolve_engine_config(c, m, DeviceKind::kCpu)->scheduler.max_num_batched_tokens, 8192);
  }

  void device_selection_explains_a_cpu_fallback() {
    DeviceConfig d;
    d.device = DeviceKind::kCpu;
    auto cpu = select_device(d);
    LATHE_QVERIFY_RESULT(cpu);
    QCOMPARE(cpu->device, DeviceKind::kCpu);
    QVERIFY(cpu->notice.empty());
    d.device = DeviceKind::kAuto;
    auto aut = select_device(d);
    LATHE_QVERIFY_RESULT(aut);
    if (aut->device == DeviceKind::kCpu) QVERIFY(!aut->notice.empty());  // says why not the GPU
    d.device = DeviceKind::kCuda;
    auto cuda = select_device(d);
    if (!cuda.is_ok()) {
      QCOMPARE(cuda.status().code(), ErrorCode::kUnsupported);
      QVERIFY(cuda.status().message().find("--device cpu") != std::string::npos);
    } else {
      QCOMPARE(cuda->device, DeviceKind::kCuda);
    }
  }

  void kv_plan_reports_and_rejects_what_cannot_fit() {
    ModelConfig m;
    m.max_position_embeddings = 4096;
    EngineConfig c;
    c.scheduler.max_model_len = 1024;
    auto resolved = resolve_engine_config(c, m, DeviceKind::kCpu);
    KvPlanInput in;
    in.block_bytes = 1 << 20;  // 1 MiB per block of 16 tokens
    in.budget_bytes = int64_t{200} << 20;
    in.budget_is_user_set = true;
    in.device_name = "CPU";
    auto plan = plan_kv_cache(*resolved, in);
    LATHE_QVERIFY_RESULT(plan);
    QCOMPARE(plan->num_blocks, 200);
    QCOMPARE(plan->num_tokens, int64_t{3200});
    QCOMPARE(plan->max_concurrent_full_len, 3);
    QVERIFY2(
        plan->summary().rfind("KV cache: 200 blocks × 16 tokens = 3200 tokens; fits 3 sequences "
                              "of max-model-len 1024",
                              0) == 0,
        plan->summary().c_str());
    // One sequence of 1024 tokens needs 64 blocks; 50 MiB hold 50.
    in.budget_bytes = int64_t{50} << 20;
    auto small = plan_kv_cache(*resolved, in);
    QVERIFY(!small.is_ok());
    QCOMPARE(small.status().code(), ErrorCode::kOutOfMemory);
    QVERIFY2(small.status().message().find(
                 "use --max-model-len <= 800 or raise --kv-cache-memory") != std::string::npos,
             small.status().message().c_str());
    // The automatic CPU budget never exceeds what max_num_seqs full sequences need.
    in.budget_bytes = int64_t{1} << 40;
    in.budget_is_user_set = false;
    QCOMPARE(plan_kv_cache(*resolved, in)->num_blocks, 64 * 64);
    in.num_blocks_override = 70;
    QCOMPARE(plan_kv_cache(*resolved, in)->num_blocks, 70);
    // On a GPU the advice names the flag that set the budget.
    in.num_blocks_override = 0;
    in.device = DeviceKind::kCuda;
    in.budget_bytes = int64_t{50} << 20;
    in.budget_is_user_set = false;
    QVERIFY(
        plan_kv_cache(*resolved, in).status().message().find("raise --gpu-memory-utilization") !=
        std::string::npos);
    in.budget_is_user_set = true;
    QVERIFY(plan_kv_cache(*resolved, in).status().message().find("raise --kv-cache-memory") !=
            std::string::npos);
  }
};

QTEST_GUILESS_MAIN(OutputTest)
#include "output_test.moc"
