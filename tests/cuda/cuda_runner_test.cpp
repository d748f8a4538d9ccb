// The CUDA model runner end to end, against the CPU runner (the reference):
//  - every fixture model (Llama, tied Llama, Llama 3 scaling, Mistral with a sliding window, Qwen2
//    with QKV bias and tied embeddings, Qwen3 with QK norm; bf16, f16 and f32 checkpoints) and a
//    dummy-weight SmolLM2-135M shape (head_dim 64: FlashInfer prefill): a batched prefill of
//    prompts of different lengths, then decode steps (CUDA graphs, padded buckets) fed with the
//    CPU's greedy tokens; logits agree within a relative L2 error of 5e-2: bf16 weights and
//    activations against float32 through every layer are expected near 1e-2 (each run prints its
//    error), while an indexing or layout bug gives errors of order 1;
//  - CUDA graphs against eager launches: the same logits within 1e-2;
//  - multi-token steps verifying draft tokens, two models sharing one device, and lookahead (the
//    next decode step launched before its tokens are read) against plain steps;
//  - the default model (SmolLM2-135M-Instruct Q4_1): greedy generations for 3 prompts equal the CPU
//    backend's, or first differ at a position where the CPU's top-2 logits are within a near-tie
//    gap: max(0.1, 4 x the RMS logit difference measured on that prompt's first step). bf16 keeps 8
//    mantissa bits, so logits computed through 30 bf16 layers differ from float32 by a few
//    hundredths; a greedy choice between two tokens closer than that is decided by rounding, not by
//    the model;
//  - memory planning refuses a max-model-len whose KV cache cannot fit, with the actionable
//  message.
// Quantized checkpoints: cuda_runner_quant_test.cpp; the fused decode path:
// cuda_runner_fused_test.cpp.
#include <QtTest>

#include <QFile>
#include <QTemporaryDir>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "cuda_runner_test_util.h"
#include "cuda_test_util.h"
#include "engine/backend/cpu/cpu_runner_factory.h"
#include "engine/backend/cuda/cuda_model_runner.h"
#include "engine/backend/cuda/cuda_runner_factory.h"
#include "engine/model/loaded_model.h"
#include "engine/model/model_loader.h"
#include "engine/runtime/model_runner.h"
#include "test_support.h"

using namespace lathe;
using namespace lathe::test;

namespace {

// The step that verifies `k` draft tokens after each sequence's last token (speculative decoding):
// every sequence computes its last token and the drafts, and samples all 1 + k rows (greedy).
// The batch is not changed: the drafts' K/V are rewritten by the next step.
ModelInput draft_step(Batch& b, int32_t k, int64_t vocab, int32_t max_blocks) {
  ModelInput in;
  in.query_start.push_back(0);
  in.max_blocks_per_seq = max_blocks;
  for (size_t s = 0; s < b.tokens.size(); ++s) {
    std::vector<TokenId> seq = b.tokens[s];
    for (int32_t j = 0; j < k; ++j)
      seq.push_back(static_cast<TokenId>((static_cast<int64_t>(s) * 37 + j * 11 + 5) % vocab));
    const int32_t len = static_cast<int32_t>(seq.size());
    while (static_cast<int32_t>(b.blocks[s].size()) * kBlock < len)
      b.blocks[s].push_back(b.next_block++);
    for (int32_t p = b.computed[s]; p < len; ++p) {
      in.token_ids.push_back(seq[static_cast<size_t>(p)]);
      in.positions.push_back(p);
      in.slot_mapping.push_back(int64_t{b.blocks[s][p / kBlock]} * kBlock + p % kBlock);
    }
    in.query_start.push_back(static_cast<int32_t>(in.token_ids.size()));
    in.seq_lens.push_back(len);
    in.max_seq_len = std::max(in.max_seq_len, len);
    in.max_query_len = std::max(in.max_query_len, len - b.computed[s]);
    std::vector<int32_t> row = b.blocks[s];
    row.resize(static_cast<size_t>(max_blocks), 0);
    in.block_tables.insert(in.block_tables.end(), row.begin(), row.end());
    in.sample_seqs.push_back(static_cast<int32_t>(s));
    in.sample_counts.push_back(1 + k);
    for (int32_t j = 0; j <= k; ++j) {
      SamplingRow r;
      r.temperature = 0.f;
      r.step = static_cast<uint64_t>(j);
      in.sampling.push_back(r);
    }
  }
  return in;
}
}  // namespace

class CudaRunnerTest : public QObject {
  Q_OBJECT
 private slots:
  void fixture_models_match_cpu_data() {
    QTest::addColumn<QString>("model");
    for (const char* m :
         {"llama_tied", "llama3_untied_bf16", "mistral_f16", "qwen2_tied", "qwen3_untied_bf16"})
      QTest::newRow(m) << QString(m);
  }
  void fixture_models_match_cpu() {
    LATHE_REQUIRE_GPU();
    QFETCH(QString, model);
    auto m = load_fixture(model.toStdString());
    LATHE_QVERIFY_RESULT(m);
    auto gpu = make_cuda(m.value(), 64, false);
    LATHE_QVERIFY_RESULT(gpu);
    const double err = lockstep_logit_error(m.value(), *gpu.value(), 6);
    qInfo("%s: worst relative logit error %.3g", qPrintable(model), err);
    QVERIFY2(err <= 5e-2, qPrintable(QString("logits relative error %1").arg(err)));
  }

  // Dummy weights are identical on both backends; head_dim 64 takes the FlashInfer prefill path.
  void dummy_smollm2_shape_matches_cpu() {
    LATHE_REQUIRE_GPU();
    LoadOptions lo;
    lo.load_format = LoadFormat::kDummy;
    lo.load_tokenizer = false;
    auto m = load_model(fixture_path("../../benchmarks/configs/smollm2-135m"), lo);
    LATHE_QVERIFY_RESULT(m);
    auto gpu = make_cuda(m.value(), 64, false);
    LATHE_QVERIFY_RESULT(gpu);
    const double err = lockstep_logit_error(m.value(), *gpu.value(), 4);
    qInfo("dummy SmolLM2-135M shape: worst relative logit error %.3g", err);
    QVERIFY2(err <= 5e-2, qPrintable(QString("logits relative error %1").arg(err)));
  }

  void graphs_match_eager() {
    LATHE_REQUIRE_GPU();
    auto m = load_fixture("qwen3_untied_bf16");
    LATHE_QVERIFY_RESULT(m);
    auto graph = make_cuda(m.value(), 64, false);
    auto eager = make_cuda(m.value(), 64, true);
    LATHE_QVERIFY_RESULT(graph);
    LATHE_QVERIFY_RESULT(eager);
    const int64_t v = m.value().config.vocab_size;
    Batch b(synthetic_prompts(v));
    for (int step = 0; step < 5; ++step) {
      const ModelInput in = b.step(16);
      auto lg = graph.value()->compute_logits(in);
      auto le = eager.value()->compute_logits(in);
      LATHE_QVERIFY_RESULT(lg);
      LATHE_QVERIFY_RESULT(le);
      LATHE_QVERIFY_REL(lg.value(), le.value(), 1e-2);
      auto out = graph.value()->execute(in);  // the GPU sampler's greedy tokens drive the batch
      LATHE_QVERIFY_RESULT(out);
      std::vector<TokenId> next;
      for (size_t s = 0; s < 3; ++s) {
        next.push_back(out.value().tokens[s].token);
        QCOMPARE(next.back(), argmax(lg.value().data() + s * v, v));
      }
      b.advance(next);
      if (step > 0) {
        auto* r = dynamic_cast<cuda::CudaModelRunner*>(graph.value().get());
        QVERIFY(r != nullptr && r->last_step_times().graph);
      }
    }
  }

  // Multi-token steps (speculative decoding): a step verifying k drafts per sequence gives the
  // CPU's logits at every one of its 1 + k rows, eagerly and as the CUDA graph of its bucket (query
  // length 1 + k), and execute() returns the accepted tokens (draft_acceptance.h).
  void drafts_verify_in_one_step() {
    LATHE_REQUIRE_GPU();
    auto m = load_fixture("qwen3_untied_bf16");
    LATHE_QVERIFY_RESULT(m);
    constexpr int32_t k = 3;
    auto cpu = make_cpu(m.value(), 64);
    auto make = [&](bool eager) -> Result<std::unique_ptr<ModelRunner>> {
      CudaRunnerOptions o;
      o.enforce_eager = eager;
      o.max_num_seqs = 8;
      o.max_num_batched_tokens = 512;
      o.max_model_len = 512;
      o.gpu_memory_utilization = 0.5;
      o.num_speculative_tokens = k;
      LATHE_ASSIGN_OR_RETURN(std::unique_ptr<ModelRunner> r,
                             create_cuda_model_runner(m.value(), o));
      LATHE_RETURN_IF_ERROR(r->allocate_kv_cache(64, kBlock));
      return r;
    };
    auto graph = make(false);
    auto eager = make(true);
    LATHE_QVERIFY_RESULT(graph);
    LATHE_QVERIFY_RESULT(eager);
    QVERIFY(graph.value()->verifies_draft_tokens());
    auto* gr = dynamic_cast<cuda::CudaModelRunner*>(graph.value().get());
    QVERIFY(gr != nullptr && !gr->graph_buckets(1 + k).empty());
    const int64_t v = m.value().config.vocab_size;
    Batch b(synthetic_prompts(v));
    {
      const ModelInput pre = b.step(16);
      for (ModelRunner* r : {cpu.get(), graph.value().get(), eager.value().get()})
        LATHE_QVERIFY_RESULT(r->compute_logits(pre));
      auto lc = cpu->compute_logits(pre);
      std::vector<TokenId> next;
      for (size_t s = 0; s < b.tokens.size(); ++s) next.push_back(argmax(lc->data() + s * v, v));
      b.advance(next);
    }
    for (int round = 0; round < 3; ++round) {
      const ModelInput in = draft_step(b, k, v, 16);
      QCOMPARE(in.num_sample_rows(), static_cast<int32_t>(b.tokens.size()) * (1 + k));
      auto lc = cpu->compute_logits(in);
      auto lg = graph.value()->compute_logits(in);
      QVERIFY(gr->last_step_times().graph);
      auto le = eager.value()->compute_logits(in);
      LATHE_QVERIFY_RESULT(lc);
      LATHE_QVERIFY_RESULT(lg);
      LATHE_QVERIFY_RESULT(le);
      QCOMPARE(lg->size(), lc->size());
      LATHE_QVERIFY_REL(lg.value(), le.value(), 1e-2);
      LATHE_QVERIFY_REL(le.value(), lc.value(), 5e-2);
      auto out = graph.value()->execute(in);
      LATHE_QVERIFY_RESULT(out);
      QCOMPARE(out->num_tokens.size(), b.tokens.size());
      size_t at = 0;
      std::vector<TokenId> next;
      for (size_t s = 0; s < b.tokens.size(); ++s) {
        const int32_t n = out->num_tokens_of(s);
        QVERIFY(n >= 1 && n <= 1 + k);
        // The first token is the greedy choice at the last real token; each further one follows an
        // accepted draft.
        QCOMPARE(out->tokens[at].token,
                 argmax(lg->data() + s * (1 + k) * static_cast<size_t>(v), v));
        for (int32_t j = 1; j < n; ++j)
          QCOMPARE(out->tokens[at + j - 1].token,
                   in.token_ids[static_cast<size_t>(in.query_start[s] + j)]);
        next.push_back(out->tokens[at].token);
        at += static_cast<size_t>(n);
      }
      b.advance(next);
    }
  }

  // Two models on one device, as a draft model beside its target: the second takes the first's
  // device context (stream, cuBLASLt, the device's memory planner) and plans its KV budget with
  // the first's load and KV cache counted; both compute correct logits, interleaved on the shared
  // stream.
  void two_models_share_a_device() {
    LATHE_REQUIRE_GPU();
    auto tm = load_fixture("qwen3_untied_bf16");
    auto dm = load_fixture("llama3_untied_bf16");
    LATHE_QVERIFY_RESULT(tm);
    LATHE_QVERIFY_RESULT(dm);
    CudaRunnerOptions o;
    o.max_num_seqs = 8;
    o.max_num_batched_tokens = 512;
    o.max_model_len = 512;
    o.gpu_memory_utilization = 0.5;
    auto target = create_cuda_model_runner(tm.value(), o);
    LATHE_QVERIFY_RESULT(target);
    const int64_t budget_alone = target.value()->memory_info().kv_budget_bytes;
    const int64_t block_bytes = target.value()->kv_block_bytes(kBlock);
    const int32_t blocks = static_cast<int32_t>(budget_alone / 4 / block_bytes);
    QVERIFY(blocks >= 64);
    LATHE_QVERIFY_OK(target.value()->allocate_kv_cache(blocks, kBlock));
    CudaRunnerOptions o2 = o;
    o2.context = target.value()->device_context();
    QVERIFY(o2.context != nullptr);
    auto draft = create_cuda_model_runner(dm.value(), o2);
    LATHE_QVERIFY_RESULT(draft);
    QVERIFY(draft.value()->device_context() == target.value()->device_context());
    const DeviceMemoryInfo& di = draft.value()->memory_info();
    const int64_t kv_bytes = int64_t{blocks} * block_bytes;
    const int64_t slack = int64_t{64} << 20;
    qInfo(
        "target alone: KV budget %lld; target KV %lld; draft: weights %lld, activations %lld, "
        "KV budget %lld",
        static_cast<long long>(budget_alone), static_cast<long long>(kv_bytes),
        static_cast<long long>(di.weight_bytes), static_cast<long long>(di.activation_bytes),
        static_cast<long long>(di.kv_budget_bytes));
    QVERIFY(di.kv_budget_bytes <= budget_alone - kv_bytes);
    QVERIFY(di.kv_budget_bytes >=
            budget_alone - kv_bytes - di.weight_bytes - di.activation_bytes - slack);
    // A context of another kind, or of another device, is refused.
    CudaRunnerOptions o3 = o2;
    o3.device = 1 + static_cast<int32_t>(o2.device);
    QCOMPARE(create_cuda_model_runner(dm.value(), o3).status().code(), ErrorCode::kInvalidArgument);
    LATHE_QVERIFY_OK(draft.value()->allocate_kv_cache(64, kBlock));
    const double draft_err = lockstep_logit_error(dm.value(), *draft.value(), 3);
    const double target_err = lockstep_logit_error(tm.value(), *target.value(), 3);
    QVERIFY2(draft_err <= 5e-2 && target_err <= 5e-2,
             qPrintable(QString("errors %1 %2").arg(draft_err).arg(target_err)));
  }

  // Lookahead (cuda_model_runner.h): a runner that launches each predicted next decode step
  // before reading its tokens gives exactly the tokens of one that does not, for greedy and seeded
  // random sampling, batches 1 to 3, over block boundaries (where it cannot predict), and through
  // a miss: once the next input carries another token than the one sampled, the predicted step is
  // dropped and the real one runs (its K/V overwrite the dropped step's).
  void lookahead_matches_plain_steps() {
    LATHE_REQUIRE_GPU();
    auto m = load_fixture("qwen3_untied_bf16");
    LATHE_QVERIFY_RESULT(m);
    auto ahead = make_cuda(m.value(), 64, false, 4);
    auto plain = make_cuda(m.value(), 64, false, 0);
    LATHE_QVERIFY_RESULT(ahead);
    LATHE_QVERIFY_RESULT(plain);
    auto* ar = dynamic_cast<cuda::CudaModelRunner*>(ahead.value().get());
    QVERIFY(ar != nullptr);
    const int64_t v = m.value().config.vocab_size;
    const auto all = synthetic_prompts(v);
    constexpr int kSteps = 40, kMissAt = 21;
    for (size_t batch = 1; batch <= 3; ++batch) {
      for (bool greedy : {true, false}) {
        std::vector<std::vector<TokenId>> prompts(all.begin(),
                                                  all.begin() + static_cast<ptrdiff_t>(batch));
        Batch b(prompts);
        const int64_t hits0 = ar->lookahead_hits(), misses0 = ar->lookahead_misses();
        for (int step = 0; step <= kSteps; ++step) {
          ModelInput in = b.step(16);
          for (size_t s = 0; s < batch; ++s) {
            SamplingRow& row = in.sampling[s];
            row.temperature = greedy ? 0.f : 0.9f;
            row.top_p = 0.95f;
            row.seed = 7 + s;
            row.step = b.tokens[s].size() - prompts[s].size();
          }
          in.next_step_continues = step > 0 && step < kSteps;
          auto oa = ahead.value()->execute(in);
          auto op = plain.value()->execute(in);
          LATHE_QVERIFY_RESULT(oa);
          LATHE_QVERIFY_RESULT(op);
          std::vector<TokenId> next;
          for (size_t s = 0; s < batch; ++s) {
            QCOMPARE(oa.value().tokens[s].token, op.value().tokens[s].token);
            next.push_back(op.value().tokens[s].token);
          }
          if (step == kMissAt) next[0] = static_cast<TokenId>((next[0] + 1) % v);
          b.advance(next);
        }
        const int64_t hits = ar->lookahead_hits() - hits0;
        const int64_t misses = ar->lookahead_misses() - misses0;
        qInfo("batch %zu %s: %lld hits, %lld misses", batch, greedy ? "greedy" : "random",
              static_cast<long long>(hits), static_cast<long long>(misses));
        QVERIFY2(hits >= kSteps / 2, "the predicted steps were not taken");
        QCOMPARE(misses, int64_t{1});
      }
    }
  }

  void default_model_greedy_matches_cpu() {
    LATHE_REQUIRE_GPU();
    const std::string path = lathe::test::default_model_path();
    if (!QFile::exists(QString::fromStdString(path)))
      QSKIP("default model not fetched (scripts/fetch-default-model.sh)");
    auto m = load_model(path);
    LATHE_QVERIFY_RESULT(m);
    const int64_t v = m.value().config.vocab_size;
    const char* texts[3] = {
        "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
        "<|im_start|>user\nWrite a haiku about the sea.<|im_end|>\n<|im_start|>assistant\n",
        "The three primary colors are"};
    std::vector<std::vector<TokenId>> prompts;
    for (const char* t : texts) prompts.push_back(m.value().tokenizer->encode(t));
    constexpr int kSteps = 24;
    auto cpu = make_cpu(m.value(), 64);
    auto gpu = make_cuda(m.value(), 64, false);
    LATHE_QVERIFY_RESULT(gpu);

    // CPU reference: greedy from its logits (argmax, lowest id on ties), logits kept per step.
    Batch bc(prompts);
    std::vector<std::vector<float>> cpu_logits;
    for (int step = 0; step < kSteps; ++step) {
      auto l = cpu->compute_logits(bc.step(8));
      LATHE_QVERIFY_RESULT(l);
      std::vector<TokenId> next;
      for (size_t s = 0; s < prompts.size(); ++s)
        next.push_back(argmax(l.value().data() + s * v, v));
      cpu_logits.push_back(l.value());
      bc.advance(next);
    }
    // GPU: its own greedy tokens (the GPU sampler), logits of the first step for the error scale.
    Batch bg(prompts);
    std::vector<double> rms(prompts.size(), 0.0);
    for (int step = 0; step < kSteps; ++step) {
      const ModelInput in = bg.step(8);
      if (step == 0) {
        auto l = gpu.value()->compute_logits(in);
        LATHE_QVERIFY_RESULT(l);
        for (size_t s = 0; s < prompts.size(); ++s) {
          const std::vector<float> a = row_of(l.value(), s, v), c = row_of(cpu_logits[0], s, v);
          double ss = 0;
          for (int64_t i = 0; i < v; ++i) ss += (a[i] - c[i]) * (a[i] - c[i]);
          rms[s] = std::sqrt(ss / v);
          qInfo("prompt %zu: first-step logits relative error %.4g, RMS difference %.4g", s,
                rel_error(a, c), rms[s]);
        }
      }
      auto out = gpu.value()->execute(in);
      LATHE_QVERIFY_RESULT(out);
      std::vector<TokenId> next;
      for (const SampledToken& t : out.value().tokens) next.push_back(t.token);
      bg.advance(next);
    }
    for (size_t s = 0; s < prompts.size(); ++s) {
      const size_t p0 = prompts[s].size();
      for (int step = 0; step < kSteps; ++step) {
        const TokenId want = bc.tokens[s][p0 + step], got = bg.tokens[s][p0 + step];
        if (want == got) continue;
        std::vector<float> l = row_of(cpu_logits[static_cast<size_t>(step)], s, v);
        std::partial_sort(l.begin(), l.begin() + 2, l.end(), std::greater<float>());
        const double gap = l[0] - l[1], allowed = std::max(0.1, 4 * rms[s]);
        qInfo(
            "prompt %zu diverges at generated token %d (CPU %d, GPU %d): CPU top-2 gap %.4g, "
            "near-tie limit %.4g",
            s, step, want, got, gap, allowed);
        QVERIFY2(gap <= allowed,
                 "the GPU's greedy output differs from the CPU's away from a near-tie");
        break;
      }
    }
  }

  void oversized_max_model_len_is_refused_with_advice() {
    LATHE_REQUIRE_GPU();
    auto m = load_fixture("llama3_untied_bf16");
    LATHE_QVERIFY_RESULT(m);
    CudaRunnerOptions o;
    o.max_num_seqs = 4;
    o.max_num_batched_tokens = 256;
    o.max_model_len = 1 << 30;  // 256 GiB of KV cache for one sequence of this model
    auto r = create_cuda_model_runner(m.value(), o);
    QVERIFY(!r.is_ok());
    QCOMPARE(static_cast<int>(r.status().code()), static_cast<int>(ErrorCode::kOutOfMemory));
    QVERIFY2(r.status().message().find("max-model-len 1073741824 needs") != std::string::npos,
             r.status().message().c_str());
    QVERIFY2(r.status().message().find("use --max-model-len <=") != std::string::npos,
             r.status().message().c_str());
  }

  // Weights that do not fit are refused before they are allocated, with the numbers and what to
  // do: Llama-3.1-70B's shape with 20,000 layers (about 31 TiB) exceeds what is free on any GPU;
  // Llama-3.1-8B's 15 GiB exceed what --gpu-memory-utilization 0.05 leaves on a GPU of < 300 GiB.
  void weights_that_do_not_fit_are_refused_with_the_numbers() {
    LATHE_REQUIRE_GPU();
    LoadOptions lo;
    lo.load_format = LoadFormat::kDummy;
    lo.load_tokenizer = false;
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string huge = config_with_layers(
        fixture_path("../../benchmarks/configs/llama-3.1-70b"), dir.path(), 20000);
    QVERIFY(!huge.empty());
    auto m = load_model(huge, lo);
    LATHE_QVERIFY_RESULT(m);
    CudaRunnerOptions o;
    o.max_num_seqs = 4;
    o.max_num_batched_tokens = 256;
    o.max_model_len = 1024;
    auto r = create_cuda_model_runner(m.value(), o);
    QVERIFY(!r.is_ok());
    QCOMPARE(static_cast<int>(r.status().code()), static_cast<int>(ErrorCode::kOutOfMemory));
    QVERIFY2(r.status().message().find("TiB on ") != std::string::npos &&
                 r.status().message().find("the weights alone do not fit") != std::string::npos,
             r.status().message().c_str());

    auto m8 = load_model(fixture_path("../../benchmarks/configs/llama-3.1-8b"), lo);
    LATHE_QVERIFY_RESULT(m8);
    o.gpu_memory_utilization = 0.05;
    auto r8 = create_cuda_model_runner(m8.value(), o);
    QVERIFY(!r8.is_ok());
    QCOMPARE(static_cast<int>(r8.status().code()), static_cast<int>(ErrorCode::kOutOfMemory));
    QVERIFY2(
        r8.status().message().find("more than --gpu-memory-utilization 0.05 leaves") !=
                std::string::npos &&
            r8.status().message().find("raise --gpu-memory-utilization above") != std::string::npos,
        r8.status().message().c_str());
    // Nothing was left behind: a model that fits still loads on the device.
    auto small = load_fixture("llama3_untied_bf16");
    LATHE_QVERIFY_RESULT(small);
    o.gpu_memory_utilization = 0.5;
    LATHE_QVERIFY_RESULT(create_cuda_model_runner(small.value(), o));
  }
};

QTEST_GUILESS_MAIN(CudaRunnerTest)
#include "cuda_runner_test.moc"
