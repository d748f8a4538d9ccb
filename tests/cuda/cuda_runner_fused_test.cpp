// The CUDA runner's fused batch-1..4 decode path (fused_decode_check.h) against the unfused path
// and the CPU runner (the reference):
//  - forced on, on the fixture models and a dummy SmolLM2-135M shape (the tensor-core decode
//    attention): logits within 1e-2 of the unfused path and 5e-2 of the CPU, batches 1 to 4;
//  - every set of fused parts the step timing may choose matches the unfused path, and the default
//    choice times whole steps of all of them;
//  - the load-time check, one layer at a time: on a 32-layer model of realistic head shapes it
//    accepts the fused path at every M, and it turns off a fused path broken on purpose (test
//    hooks: RoPE of the other pair style, a norm epsilon of 1e-2);
//  - the check's error measures and the sets of fused parts (host only: run without a GPU).
#include <QtTest>

#include <cmath>
#include <set>
#include <string>

#include "cuda_runner_test_util.h"
#include "cuda_test_util.h"
#include "engine/backend/cuda/cuda_model_runner.h"
#include "test_support.h"

using namespace lathe;
using namespace lathe::test;

namespace {

// Sets the fused decode path's test hooks for the scope (read when a runner is created).
class ScopedFusedHooks {
 public:
  explicit ScopedFusedHooks(const cuda::FusedDecodeTestHooks& hooks) {
    cuda::set_fused_decode_test_hooks(hooks);
  }
  ~ScopedFusedHooks() { cuda::set_fused_decode_test_hooks(cuda::FusedDecodeTestHooks{}); }
};

// 32 layers of realistic head shapes with few parameters, dummy weights: hidden 1024, 8 query and
// 2 KV heads of 128 (GQA 4), FFN 3584, vocabulary 32000, Llama 3 RoPE (0.45 B parameters).
Result<LoadedModel> deep_dummy_model() {
  LoadOptions lo;
  lo.load_format = LoadFormat::kDummy;
  lo.load_tokenizer = false;
  LATHE_ASSIGN_OR_RETURN(LoadedModel m,
                         load_model(fixture_path("../../benchmarks/configs/llama-3.1-8b"), lo));
  ModelConfig& c = m.config;
  c.name = "llama-32x1024";
  c.hidden_size = 1024;
  c.intermediate_size = 3584;
  c.num_heads = 8;
  c.num_kv_heads = 2;
  c.head_dim = 128;
  c.vocab_size = 32000;
  LATHE_RETURN_IF_ERROR(c.validate());
  if (c.num_layers < 32) return internal_error("expected the 32 layers of Llama-3.1-8B");
  return m;
}

// A model by test-data name: a fixture folder, or "dummy:<benchmarks/configs name>".
Result<LoadedModel> load_named(const QString& model) {
  if (!model.startsWith("dummy:")) return load_fixture(model.toStdString());
  LoadOptions lo;
  lo.load_format = LoadFormat::kDummy;
  lo.load_tokenizer = false;
  return load_model(fixture_path("../../benchmarks/configs/" + model.mid(6).toStdString()), lo);
}

// The unfused runner with the split-KV decode kernel: what the fused paths are compared with.
Result<std::unique_ptr<ModelRunner>> make_plain_cuda(const LoadedModel& m) {
  CudaSwitches sw;
  sw.fused = FusedDecodeMode::kOff;
  sw.decode_attention = false;
  return make_cuda(m, 64, false, 1, sw);
}
}  // namespace

class CudaRunnerFusedTest : public QObject {
  Q_OBJECT
 private slots:
  // The batch-1..4 fused path (forced on) with the tensor-core decode attention against the
  // unfused path with the split-KV decode kernel, on the same model and steps: batches of 1 to 4
  // sequences (graph buckets 1, 2, 4 and 3 padded to 4), logits within 1e-2 of each other (both
  // round at the same points; summation order and the softmax split differ), and against the CPU.
  void fused_decode_matches_unfused_data() {
    QTest::addColumn<QString>("model");
    for (const char* m : {"llama3_untied_bf16", "qwen2_tied", "qwen3_untied_bf16", "mistral_f16",
                          "dummy:smollm2-135m"})
      QTest::newRow(m) << QString(m);
  }
  void fused_decode_matches_unfused() {
    LATHE_REQUIRE_GPU();
    QFETCH(QString, model);
    // The fixtures have head_dim 16 or 32 (split-KV decode); the dummy SmolLM2-135M shape (head_dim
    // 64, GQA 3) takes the tensor-core decode kernel.
    Result<LoadedModel> m = load_named(model);
    LATHE_QVERIFY_RESULT(m);
    CudaSwitches forced;
    forced.fused = FusedDecodeMode::kForce;
    Result<std::unique_ptr<ModelRunner>> fast = make_cuda(m.value(), 64, false, 1, forced);
    Result<std::unique_ptr<ModelRunner>> plain = make_plain_cuda(m.value());
    LATHE_QVERIFY_RESULT(fast);
    LATHE_QVERIFY_RESULT(plain);
    auto* fr = dynamic_cast<cuda::CudaModelRunner*>(fast.value().get());
    auto* pr = dynamic_cast<cuda::CudaModelRunner*>(plain.value().get());
    QVERIFY(fr != nullptr && pr != nullptr);
    QVERIFY(!fr->fused_decode_choices().empty() && fr->fused_decode_choices()[0].use);
    QCOMPARE(fr->fused_decode_choices()[0].parts.name(), std::string("qkv+o+gate_up+down"));
    QVERIFY(pr->fused_decode_choices().empty() && !pr->uses_decode_attention());
    const auto all = synthetic_prompts(m.value().config.vocab_size);
    for (size_t batch = 1; batch <= 4; ++batch) {
      std::vector<std::vector<TokenId>> prompts;
      for (size_t i = 0; i < batch; ++i) prompts.push_back(all[i % all.size()]);
      const double fast_err = lockstep_logit_error(m.value(), *fast.value(), 4, prompts);
      qInfo("%s batch %zu: worst relative logit error of the fused path vs the CPU: %.3g",
            qPrintable(model), batch, fast_err);
      QVERIFY2(fast_err <= 5e-2, qPrintable(QString("fused path error %1").arg(fast_err)));
    }
    expect_same_logits(m.value(), *fast.value(), *plain.value(), 4, 1e-2);
  }

  // Every valid set of fused parts (some projections fused, the others unfused, as the load-time
  // step timing may choose) against the unfused path: the same logits within 1e-2, and the
  // per-layer check passes.
  void fused_part_sets_match_unfused_data() {
    QTest::addColumn<QString>("model");
    for (const char* m : {"llama3_untied_bf16", "dummy:smollm2-135m"})
      QTest::newRow(m) << QString(m);
  }
  void fused_part_sets_match_unfused() {
    LATHE_REQUIRE_GPU();
    QFETCH(QString, model);
    Result<LoadedModel> m = load_named(model);
    LATHE_QVERIFY_RESULT(m);
    Result<std::unique_ptr<ModelRunner>> plain = make_plain_cuda(m.value());
    LATHE_QVERIFY_RESULT(plain);
    for (const cuda::FusedParts& parts : cuda::fused_part_sets()) {
      if (!parts.any()) continue;
      cuda::FusedDecodeTestHooks hooks;
      hooks.assume_fused_faster = true;
      hooks.parts = parts;
      Result<std::unique_ptr<ModelRunner>> gpu = internal_error("not created");
      {
        ScopedFusedHooks h(hooks);
        gpu = make_cuda(m.value(), 64, false);
      }
      LATHE_QVERIFY_RESULT(gpu);
      auto* cr = dynamic_cast<cuda::CudaModelRunner*>(gpu.value().get());
      QVERIFY(cr != nullptr && !cr->fused_decode_choices().empty());
      for (const cuda::FusedDecodeChoice& ch : cr->fused_decode_choices()) {
        QVERIFY2(ch.use && ch.check.passed(), (parts.name() + ": " + ch.note).c_str());
        QCOMPARE(ch.parts.name(), parts.name());
      }
      qInfo("%s parts %s: checked, comparing logits", qPrintable(model), parts.name().c_str());
      expect_same_logits(m.value(), *gpu.value(), *plain.value(), 3, 1e-2);
      if (QTest::currentTestFailed()) return;
    }
  }

  // The sets of fused parts (host only).
  void fused_part_sets_are_valid() {
    const auto& sets = cuda::fused_part_sets();
    QVERIFY(!sets[0].any());
    std::set<std::string> names;
    for (const cuda::FusedParts& p : sets) {
      QVERIFY2(p.valid(), p.name().c_str());
      names.insert(p.name());
    }
    QCOMPARE(names.size(), sets.size());
    QVERIFY(names.count("none") == 1 && names.count("qkv+o+gate_up+down") == 1);
    // A fused QKV reads the residual whole (needs a fused down), a fused gate/up likewise (o).
    QVERIFY(!(cuda::FusedParts{true, false, false, false}.valid()));
    QVERIFY(!(cuda::FusedParts{false, false, true, true}.valid()));
  }

  // The default choice: whole decode steps are timed for all nine sets at every M the kernels fit,
  // and the fastest serves (checked) or, when the unfused step is fastest, nothing fused.
  void fused_choice_times_whole_steps() {
    LATHE_REQUIRE_GPU();
    auto m = deep_dummy_model();
    LATHE_QVERIFY_RESULT(m);
    Result<std::unique_ptr<ModelRunner>> gpu = make_cuda(m.value(), 64, false);
    LATHE_QVERIFY_RESULT(gpu);
    auto* cr = dynamic_cast<cuda::CudaModelRunner*>(gpu.value().get());
    QVERIFY(cr != nullptr);
    QCOMPARE(static_cast<int>(cr->fused_decode_choices().size()), cuda::kDecodeGemvMaxM);
    std::string used;
    for (const cuda::FusedDecodeChoice& ch : cr->fused_decode_choices()) {
      qInfo("M=%lld: %s", static_cast<long long>(ch.m), ch.note.c_str());
      QVERIFY(ch.step_unfused_us > 0);
      size_t timed = 0;
      for (size_t at = ch.steps.find(" us"); at != std::string::npos;
           at = ch.steps.find(" us", at + 1))
        ++timed;
      QCOMPARE(timed, cuda::fused_part_sets().size());
      if (ch.use) {
        QVERIFY(ch.parts.any() && ch.parts.valid() && ch.check.passed());
        QVERIFY(ch.step_us < ch.step_unfused_us);
        used += (used.empty() ? "" : ",") + std::to_string(ch.m);
      } else {
        QVERIFY2(ch.note.find("unfused step is the fastest") != std::string::npos, ch.note.c_str());
      }
    }
    const std::string plan = cr->plan_summary();
    QVERIFY2(plan.find("fused decode projections for batch " + (used.empty() ? "none" : used)) !=
                 std::string::npos,
             plan.c_str());
  }

  // The check's error measures (host only: runs without a GPU).
  void fused_check_error_measures() {
    const std::vector<float> in = {1.f, 2.f, 3.f, 4.f};
    const std::vector<float> unfused = {1.5f, 2.f, 3.f, 4.f};  // update (0.5, 0, 0, 0)
    const std::vector<float> fused = {1.5f, 2.01f, 3.f, 4.f};
    QCOMPARE(cuda::fused_update_error(unfused.data(), unfused.data(), in.data(), 4), 0.0);
    QVERIFY(std::fabs(cuda::fused_update_error(fused.data(), unfused.data(), in.data(), 4) - 0.02) <
            1e-5);
    QVERIFY(std::isinf(cuda::fused_update_error(fused.data(), unfused.data(), unfused.data(), 4)));
    QCOMPARE(cuda::fused_update_error(in.data(), in.data(), in.data(), 4), 0.0);
    std::vector<float> bad = fused;
    bad[3] = NAN;
    QVERIFY(std::isinf(cuda::fused_update_error(bad.data(), unfused.data(), in.data(), 4)));
    QVERIFY(std::isinf(cuda::fused_relative_error(bad.data(), fused.data(), 4)));
    const std::vector<float> b = {3.f, 4.f}, a = {3.f, 4.05f};
    QVERIFY(std::fabs(cuda::fused_relative_error(a.data(), b.data(), 2) - 0.01) < 1e-6);
  }

  // The check compares the fused and the unfused path one layer at a time from identical inputs
  // (fused_decode_check.h). With the timing taken as won, every M is checked: a healthy fused path
  // passes at every M (the whole step's logits, logged, differ more: rounding compounds over 32
  // layers), a broken one fails and is turned off, and the plan says which M serve fused.
  void fused_decode_check_per_layer_data() {
    QTest::addColumn<int>("fault");
    QTest::newRow("healthy") << static_cast<int>(cuda::FusedDecodeFault::kNone);
    QTest::newRow("rope-style") << static_cast<int>(cuda::FusedDecodeFault::kRopeStyle);
    QTest::newRow("norm-eps") << static_cast<int>(cuda::FusedDecodeFault::kNormEps);
  }
  void fused_decode_check_per_layer() {
    LATHE_REQUIRE_GPU();
    QFETCH(int, fault);
    auto m = deep_dummy_model();
    LATHE_QVERIFY_RESULT(m);
    cuda::FusedDecodeTestHooks hooks;
    hooks.assume_fused_faster = true;
    hooks.fault = static_cast<cuda::FusedDecodeFault>(fault);
    const bool healthy = hooks.fault == cuda::FusedDecodeFault::kNone;
    Result<std::unique_ptr<ModelRunner>> gpu = internal_error("not created");
    {
      // The default choice (neither forced nor off), RoPE in the QKV epilogue allowed.
      ScopedFusedHooks h(hooks);
      gpu = make_cuda(m.value(), 64, false);
    }
    LATHE_QVERIFY_RESULT(gpu);
    auto* cr = dynamic_cast<cuda::CudaModelRunner*>(gpu.value().get());
    QVERIFY(cr != nullptr);
    const std::vector<cuda::FusedDecodeChoice>& choices = cr->fused_decode_choices();
    QCOMPARE(static_cast<int>(choices.size()), cuda::kDecodeGemvMaxM);
    for (const cuda::FusedDecodeChoice& ch : choices) {
      const cuda::FusedDecodeCheck& k = ch.check;
      qInfo(
          "%s M=%lld: worst layer output error %.3g (layer %d), K/V %.3g (layer %d), LM head "
          "%.3g, whole step %.3g (information) -> %s",
          QTest::currentDataTag(), static_cast<long long>(ch.m), k.layer_err, k.layer, k.kv_err,
          k.kv_layer, k.lm_head_err, k.step_err, ch.use ? "fused" : "unfused");
      QVERIFY2(k.done && k.context > 0, "the check did not run, or without context");
      QVERIFY2(ch.rope && ch.lm_head, "the test hook should select every fused part");
      if (healthy) {
        QVERIFY2(ch.use && k.passed(), ch.note.c_str());
      } else {
        QVERIFY2(!ch.use && !k.passed(), ch.note.c_str());
        QVERIFY(k.layer_err > cuda::kFusedLayerTolerance);
      }
    }
    const std::string plan = cr->plan_summary();
    QVERIFY2(plan.find(healthy ? "fused decode projections for batch 1,2,3,4"
                               : "fused decode projections for batch none") != std::string::npos,
             plan.c_str());
  }
};

QTEST_GUILESS_MAIN(CudaRunnerFusedTest)
#include "cuda_runner_fused_test.moc"
