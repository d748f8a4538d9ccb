// evaluate() and its parts on tiny fixtures with known answers: the metrics against direct
// formulas, the window plan, a model against itself (KL 0, top-1 agreement 1, ratio 1), the
// perplexity against the logits of every prefix computed one sequence each (no sample_counts), and
// every kind of bad input with its message.
#include <QtTest>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "engine/eval/eval_metrics.h"
#include "engine/eval/eval_text.h"
#include "engine/eval/eval_windows.h"
#include "engine/eval/evaluate.h"
#include "engine/model/model_loader.h"
#include "quant/quant_model_util.h"
#include "test_support.h"

using namespace lathe;

namespace {

const char* kText =
    "The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor jugs. "
    "How vexingly quick daft zebras jump! Sphinx of black quartz, judge my vow. The five "
    "boxing wizards jump quickly. Jackdaws love my big sphinx of quartz.";

std::string tiny_llama() {
  return test::fixture_path("model/tiny_llama");
}

EvalConfig cpu_config(const std::string& model, const std::string& text) {
  EvalConfig c;
  c.model = model;
  c.text = text;
  c.device.device = DeviceKind::kCpu;
  c.device.num_threads = 2;
  return c;
}

std::string write_text(const QTemporaryDir& dir, const std::string& name,
                       const std::string& contents) {
  const std::string path = dir.path().toStdString() + "/" + name;
  std::ofstream(path, std::ios::binary) << contents;
  return path;
}

// -log softmax(l)[t] in long double, written independently of eval_metrics.cpp.
double direct_nll(const float* l, int64_t vocab, int32_t t) {
  long double m = l[0];
  for (int64_t v = 1; v < vocab; ++v) m = std::max<long double>(m, l[v]);
  long double s = 0;
  for (int64_t v = 0; v < vocab; ++v) s += std::exp(static_cast<long double>(l[v]) - m);
  return static_cast<double>(-(static_cast<long double>(l[t]) - m - std::log(s)));
}

}  // namespace

class EvalTest : public QObject {
  Q_OBJECT
 private slots:
  void metrics_match_direct_formulas() {
    const float a[3] = {1.f, 2.f, 3.f};
    const float b[3] = {3.f, 2.f, 1.f};
    PositionScore self = score_position(a, a, 3, 1);
    QCOMPARE(self.kld, 0.0);
    QVERIFY(self.same_top);
    QCOMPARE(self.delta_p, 0.0);
    QVERIFY(std::fabs(self.nll - direct_nll(a, 3, 1)) < 1e-12);
    // KL(b || a) by hand: p = softmax(b), q = softmax(a); sum p log(p / q).
    const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
    double kl = 0;
    for (int i = 0; i < 3; ++i) {
      const double p = std::exp(double(b[i])) / z, q = std::exp(double(a[i])) / z;
      kl += p * std::log(p / q);
    }
    PositionScore s = score_position(a, b, 3, 2);
    QVERIFY(std::fabs(s.kld - kl) < 1e-12);
    QVERIFY(!s.same_top);
    QVERIFY(std::fabs(s.delta_p - (std::exp(3.0) / z - std::exp(1.0) / z)) < 1e-12);
    QVERIFY(std::fabs(s.ref_nll - direct_nll(b, 3, 2)) < 1e-12);

    const SummaryStats st = summarize({5, 1, 3, 2, 4});
    QCOMPARE(st.mean, 3.0);
    QCOMPARE(st.median, 3.0);
    QCOMPARE(st.p99, 5.0);
    QCOMPARE(st.max, 5.0);
    std::vector<double> many(200);
    for (int i = 0; i < 200; ++i) many[i] = i + 1;
    QCOMPARE(summarize(many).p99, 198.0);  // nearest rank: ceil(0.99 * 200) = 198
    QCOMPARE(summarize(many).median, 100.5);
  }

  void windows_slide_and_score_each_target_once() {
    auto w = plan_eval_windows(100, 40, 20, 0);
    LATHE_QVERIFY_RESULT(w);
    // Starts 0, 20, 40, 60 (60 + 40 = 100); targets 1..39, then the last 20 of each.
    QCOMPARE(w.value().size(), size_t{4});
    QCOMPARE(w.value()[0].first_target, 1);
    QCOMPARE(w.value()[3].begin, int64_t{60});
    QCOMPARE(w.value()[3].first_target, 20);
    // Every target 1..99 exactly once.
    std::vector<int> seen(100, 0);
    for (const EvalWindow& x : w.value())
      for (int t = x.first_target; t < 40; ++t) ++seen[x.begin + t];
    for (int t = 1; t < 100; ++t) QCOMPARE(seen[t], 1);
    QCOMPARE(plan_eval_windows(100, 40, 20, 2).value().size(), size_t{2});
    QCOMPARE(plan_eval_windows(40, 40, 40, 0).value().size(), size_t{1});
    for (auto [n, ctx, stride, maxw, needle] :
         {std::tuple{39, 40, 20, 0, "fewer than one window of --ctx 40"},
          std::tuple{100, 1, 1, 0, "--ctx must be at least 2"},
          std::tuple{100, 40, 41, 0, "--stride must be in [1, --ctx = 40]"},
          std::tuple{100, 40, 0, 0, "--stride must be in"},
          std::tuple{100, 40, 20, -1, "--max-windows"}}) {
      auto bad = plan_eval_windows(n, ctx, stride, maxw);
      QVERIFY(!bad.is_ok());
      QVERIFY2(bad.status().message().find(needle) != std::string::npos,
               bad.status().message().c_str());
    }
  }

  void score_from_keeps_the_second_half_as_llama_perplexity() {
    // llama-perplexity's plan: chunks of 512 at 0, 512, ...; each scores targets 257..511.
    auto w = plan_eval_windows(2100, 512, 512, 0, 257);
    LATHE_QVERIFY_RESULT(w);
    QCOMPARE(w.value().size(), size_t{4});
    for (size_t i = 0; i < 4; ++i) {
      QCOMPARE(w.value()[i].begin, int64_t(512 * i));
      QCOMPARE(w.value()[i].first_target, 257);
    }
    // Without it, stride == ctx scores targets 1..ctx-1 of every window (offset 0 has no
    // prediction in the window).
    const std::vector<EvalWindow> plain = plan_eval_windows(2100, 512, 512, 0).value();
    for (const EvalWindow& x : plain) QCOMPARE(x.first_target, 1);
    // With a sliding plan, the later of the two limits wins.
    auto s = plan_eval_windows(100, 40, 20, 0, 5).value();
    QCOMPARE(s[0].first_target, 5);
    QCOMPARE(s[1].first_target, 20);
    auto t = plan_eval_windows(100, 40, 20, 0, 30).value();
    QCOMPARE(t[1].first_target, 30);
    for (int bad : {-1, 40, 41}) {
      auto r = plan_eval_windows(100, 40, 20, 0, bad);
      QVERIFY(!r.is_ok());
      QVERIFY2(r.status().message().find("--score-from must be in [0, --ctx - 1 = 39]") !=
                   std::string::npos,
               r.status().message().c_str());
    }
  }

  void model_against_itself_has_zero_divergence() {
    EvalConfig c = cpu_config(tiny_llama(), kText);
    c.reference = tiny_llama();
    c.context = 32;
    c.stride = 16;
    c.logit_rows = 7;  // windows in several steps, scored rows split across them
    int calls = 0;
    auto r = evaluate(
        c, [&](const EvalProgress&) { ++calls; }, nullptr);
    LATHE_QVERIFY_RESULT(r);
    const EvalReport& e = r.value();
    QVERIFY(e.windows >= 2);
    QCOMPARE(calls, e.windows);
    QCOMPARE(e.scored, int64_t{31} + int64_t{16} * (e.windows - 1));
    QCOMPARE(e.kld.mean, 0.0);
    QCOMPARE(e.kld.max, 0.0);
    QCOMPARE(e.top1_agreement, 1.0);
    QCOMPARE(e.mean_delta_p, 0.0);
    QCOMPARE(e.ppl_ratio, 1.0);
    QVERIFY(e.perplexity > 1.0 && std::isfinite(e.perplexity));
  }

  void perplexity_equals_a_direct_computation() {
    // The first window (targets 1..ctx-1) against the logits of every prefix, each prefix run as
    // its own sequence that samples only its last token.
    constexpr int32_t kCtx = 24;
    EvalConfig c = cpu_config(tiny_llama(), kText);
    c.context = kCtx;
    c.max_windows = 1;
    c.logit_rows = 5;
    auto r = evaluate(c, nullptr, nullptr);
    LATHE_QVERIFY_RESULT(r);
    QCOMPARE(r.value().scored, int64_t{kCtx - 1});

    auto m = load_model(tiny_llama());
    LATHE_QVERIFY_RESULT(m);
    EncodeOptions o;
    o.add_special_tokens = false;
    o.parse_special = false;
    std::vector<int32_t> ids = m.value().tokenizer->encode(kText, o);
    ids.resize(kCtx);
    if (m.value().tokenizer->add_bos()) ids[0] = m.value().tokenizer->bos_id();
    std::vector<int32_t> lengths;
    for (int32_t len = 1; len < kCtx; ++len) lengths.push_back(len);
    auto logits = test::prefix_logits(tiny_llama(), ids, lengths);
    LATHE_QVERIFY_RESULT(logits);
    const int64_t vocab = m.value().config.vocab_size;
    double nll = 0;
    for (int32_t i = 0; i + 1 < kCtx; ++i)
      nll += direct_nll(logits.value().data() + i * vocab, vocab, ids[i + 1]);
    const double ppl = std::exp(nll / (kCtx - 1));
    QVERIFY2(std::fabs(r.value().perplexity - ppl) < 1e-9 * ppl,
             qPrintable(QString("%1 vs %2").arg(r.value().perplexity).arg(ppl)));
  }

  void score_from_equals_a_direct_computation_of_the_second_halves() {
    // Two non-overlapping windows of 24 tokens, each scoring targets 13..23 (llama-perplexity's
    // plan at n_ctx 24), against the logits of every prefix of each window.
    constexpr int32_t kCtx = 24, kFrom = 13;
    EvalConfig c = cpu_config(tiny_llama(), kText);
    c.context = kCtx;
    c.stride = kCtx;
    c.score_from = kFrom;
    c.max_windows = 2;
    c.logit_rows = 5;
    auto r = evaluate(c, nullptr, nullptr);
    LATHE_QVERIFY_RESULT(r);
    QCOMPARE(r.value().scored, int64_t{2 * (kCtx - kFrom)});
    QCOMPARE(r.value().score_from, kFrom);

    auto m = load_model(tiny_llama());
    LATHE_QVERIFY_RESULT(m);
    EncodeOptions o;
    o.add_special_tokens = false;
    o.parse_special = false;
    const std::vector<int32_t> all = m.value().tokenizer->encode(kText, o);
    QVERIFY(all.size() >= size_t{2 * kCtx});
    const int64_t vocab = m.value().config.vocab_size;
    double nll = 0;
    for (int32_t w = 0; w < 2; ++w) {
      std::vector<int32_t> ids(all.begin() + w * kCtx, all.begin() + (w + 1) * kCtx);
      if (m.value().tokenizer->add_bos()) ids[0] = m.value().tokenizer->bos_id();
      std::vector<int32_t> lengths;
      for (int32_t len = kFrom; len < kCtx; ++len) lengths.push_back(len);
      auto logits = test::prefix_logits(tiny_llama(), ids, lengths);
      LATHE_QVERIFY_RESULT(logits);
      for (size_t i = 0; i < lengths.size(); ++i)
        nll += direct_nll(logits.value().data() + i * vocab, vocab, ids[lengths[i]]);
    }
    const double ppl = std::exp(nll / (2 * (kCtx - kFrom)));
    QVERIFY2(std::fabs(r.value().perplexity - ppl) < 1e-9 * ppl,
             qPrintable(QString("%1 vs %2").arg(r.value().perplexity).arg(ppl)));
    // Scoring every target of the same windows gives another figure: the option is used.
    c.score_from = 0;
    auto full = evaluate(c, nullptr, nullptr);
    LATHE_QVERIFY_RESULT(full);
    QCOMPARE(full.value().scored, int64_t{2 * (kCtx - 1)});
    QVERIFY(std::fabs(full.value().perplexity - ppl) > 1e-6 * ppl);
  }

  void different_models_diverge() {
    // The qwen2 fixture reads the text with its own tokenizer: refused by name.
    EvalConfig c = cpu_config(tiny_llama(), kText);
    c.reference = test::fixture_path("model/tiny_qwen2");
    c.context = 16;
    auto r = evaluate(c, nullptr, nullptr);
    if (r.is_ok()) {
      // Same tokenization: then the figures must show two different models.
      QVERIFY(r.value().kld.mean > 0.0);
      QVERIFY(r.value().top1_agreement < 1.0);
    } else {
      QVERIFY2(
          r.status().message().find("tokenizers split the text differently") != std::string::npos,
          r.status().message().c_str());
    }
  }

  void bad_input_is_refused_by_name() {
    QTemporaryDir dir;
    // Vocabulary mismatch: a synthetic model with 320 tokens against the 300 of tiny_llama.
    test::SyntheticModel sm;
    sm.hidden = 64;
    sm.intermediate = 128;
    sm.layers = 1;
    sm.vocab = 320;
    const std::string other = dir.path().toStdString() + "/vocab320";
    LATHE_QVERIFY_OK(test::write_synthetic_model(other, sm));
    struct Case {
      const char* what;
      EvalConfig config;
      const char* needle;
    };
    std::vector<Case> cases;
    {
      EvalConfig c = cpu_config(tiny_llama(), kText);
      c.reference = other;
      c.context = 16;
      cases.push_back({"vocab", c, "vocabulary of 300 tokens and the reference 320"});
    }
    {
      EvalConfig c = cpu_config(tiny_llama(), "");
      c.text_file = write_text(dir, "empty.txt", " \n\n ");
      cases.push_back({"empty", c, "is empty"});
    }
    {
      EvalConfig c = cpu_config(tiny_llama(), "");
      c.text_file = write_text(dir, "bin.txt", std::string("ab\0cd", 5));
      cases.push_back({"binary", c, "is not text: a NUL byte"});
    }
    {
      EvalConfig c = cpu_config(tiny_llama(), "");
      c.text_file = write_text(dir, "latin1.txt", "caf\xe9 au lait");
      cases.push_back({"not utf-8", c, "invalid UTF-8 at byte 3"});
    }
    {
      EvalConfig c = cpu_config(tiny_llama(), "");
      c.text_file = dir.path().toStdString() + "/missing.txt";
      cases.push_back({"missing", c, "missing.txt"});
    }
    {
      EvalConfig c = cpu_config(tiny_llama(), "Short.");
      c.context = 64;
      cases.push_back({"short", c, "fewer than one window of --ctx 64"});
    }
    {
      EvalConfig c = cpu_config(tiny_llama(), kText);
      c.context = 16;
      c.stride = 17;
      cases.push_back({"stride", c, "--stride must be in [1, --ctx = 16]"});
    }
    {
      EvalConfig c = cpu_config(tiny_llama(), kText);
      c.context = 16;
      c.score_from = 16;
      cases.push_back({"score-from", c, "--score-from must be in [0, --ctx - 1 = 15]"});
    }
    {
      EvalConfig c = cpu_config(dir.path().toStdString() + "/nothing", kText);
      cases.push_back({"no model", c, "model"});
    }
    for (const Case& k : cases) {
      auto r = evaluate(k.config, nullptr, nullptr);
      QVERIFY2(!r.is_ok(), k.what);
      QVERIFY2(r.status().message().find(k.needle) != std::string::npos,
               qPrintable(QString("%1: %2").arg(k.what, r.status().message().c_str())));
    }
  }

  void cancel_stops_the_run() {
    EvalConfig c = cpu_config(tiny_llama(), kText);
    c.context = 16;
    std::atomic<bool> cancel{true};
    auto r = evaluate(c, nullptr, &cancel);
    QVERIFY(!r.is_ok());
    QCOMPARE(r.status().code(), ErrorCode::kCancelled);
  }
};

QTEST_GUILESS_MAIN(EvalTest)
#include "eval_test.moc"
