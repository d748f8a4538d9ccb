// The CUDA model runner on quantized checkpoints, against the CPU runner (the reference):
//  - every format of tests/fixtures/formats (GPTQ v1/v2 with act-order and mislabelled zero points,
//    AWQ, compressed-tensors int4/int8/FP8, vLLM FP8 with block scales, GGUF q2_k/q3_k) runs on
//    the GPU in its format: logits against the CPU on the same checkpoint, and against the 16-bit
//    twin the fixture was made from;
//  - int4 groups of 16 inputs, which the kernels cannot take, are refused at load with the reason;
//  - GGUF projections kept in their blocks (mixed types within one projection) compute what the
//    same weights dequantized at upload compute, in less device memory; Q8_0 / Q4_0 parts
//    converted into the integer row layout (gguf_repack.h) what the blocks compute;
//  - dummy weights in GGUF block types (--quantization q4_k_m ..., dummy_quant.h): planned like a
//    file's parts (host side, runs without a GPU), and on the GPU they load in those bytes and
//    decode finite logits.
#include <QtTest>

#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>

#include <map>
#include <string>

#include "cuda_runner_test_util.h"
#include "cuda_test_util.h"
#include "engine/backend/cuda/cuda_weights.h"
#include "engine/backend/cuda/dummy_quant.h"
#include "engine/model/dequant.h"
#include "engine/quant/ggml_quantize.h"
#include "test_support.h"

using namespace lathe;
using namespace lathe::test;

namespace {

// Fixtures with int4 groups of 16 inputs, which the CUDA kernels refuse.
const QStringList kGroup16Fixtures = {"gptq_dynamic", "ct_mixed_groups"};

// A safetensors fixture whose projections are replaced by GGUF blocks of the 32-weight types, a
// different type per projection part (q|k|v of one projection in three formats) and the MLP's up
// projection kept in 16 bits (a dense part inside a stored projection): what a GGUF file of mixed
// types gives the loader.
Result<LoadedModel> gguf_quantized_fixture(const std::string& name) {
  LATHE_ASSIGN_OR_RETURN(LoadedModel m, load_fixture(name));
  const DType types[] = {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1};
  int next = 0;
  const std::map<std::string, TensorView> tensors = m.weights.tensors();
  for (const auto& [tname, t] : tensors) {
    if (t.ndim != 2 || tname == "token_embd" || tname.find("ffn_up") != std::string::npos) continue;
    const DType type = types[next++ % 5];
    std::vector<float> f(static_cast<size_t>(t.numel()));
    LATHE_RETURN_IF_ERROR(dequantize_tensor(t, f.data()));
    const int64_t rows = t.shape[0], cols = t.shape[1];
    std::vector<uint8_t> blocks(static_cast<size_t>(rows * (cols / dtype_info(type).block_size) *
                                                    dtype_info(type).block_bytes));
    LATHE_RETURN_IF_ERROR(quantize_rows_ggml(type, f.data(), rows, cols, blocks.data()));
    const uint8_t* data = m.weights.own(std::move(blocks));
    m.weights.add(tname, make_view(type, {rows, cols}, data));
  }
  return m;
}
// Dummy weights of benchmarks/configs/<config> (`layers` > 0: that many layers) with
// --quantization `q`.
Result<LoadedModel> load_dummy(const std::string& config, const std::string& q, const QString& dir,
                               int layers = 0) {
  LoadOptions lo;
  lo.load_format = LoadFormat::kDummy;
  lo.load_tokenizer = false;
  LATHE_RETURN_IF_ERROR(parse_quantization_option(q, true, &lo.quantization, &lo.dummy_gguf));
  std::string path = fixture_path("../../benchmarks/configs/" + config);
  if (layers > 0) path = config_with_layers(path, dir, layers);
  return load_model(path, lo);
}

// The device bytes plan_projection() gives the dummy's quantized projections and LM head.
Result<int64_t> planned_bytes(const cuda::DummyQuantWeights& dq) {
  int64_t total = 0;
  auto add = [&](const LinearGroup& g) -> Status {
    LATHE_ASSIGN_OR_RETURN(const cuda::ProjectionStorage s,
                           cuda::plan_projection(&g, g.n(), g.k(), 2, true));
    if (!s.stored) return internal_error("a dummy projection planned dense");
    total += s.bytes();
    return {};
  };
  for (const LayerWeights& l : dq.layers)
    for (const LinearGroup* g : {&l.qkv, &l.o, &l.gate_up, &l.down}) LATHE_RETURN_IF_ERROR(add(*g));
  if (!dq.lm_head.parts.empty()) LATHE_RETURN_IF_ERROR(add(dq.lm_head));
  return total;
}

}  // namespace

class CudaRunnerQuantTest : public QObject {
  Q_OBJECT
 private slots:
  // Quantized checkpoints of every format (tests/fixtures/formats: GPTQ v1/v2 with act-order and
  // mislabelled zero points, AWQ, compressed-tensors int4/int8/FP8, vLLM FP8 with block scales,
  // GGUF q2_k/q3_k) run on the GPU in their formats (integer codes and FP8 repacked,
  // weight_repack.h; GGUF blocks as stored): against the CPU on the same checkpoint, and against
  // the 16-bit twin the fixture was made from (the same dequantized values) on the GPU.
  void quantized_checkpoints_match_cpu_data() {
    QTest::addColumn<QString>("model");
    QTest::addColumn<QString>("twin");
    QFile f(QString::fromStdString(fixture_path("formats/manifest.json")));
    if (!f.open(QIODevice::ReadOnly)) qFatal("formats/manifest.json");
    const QJsonObject o = QJsonDocument::fromJson(f.readAll()).object();
    for (auto it = o.begin(); it != o.end(); ++it)
      if (!kGroup16Fixtures.contains(it.key()))  // refused on the GPU (below)
        QTest::newRow(qPrintable(it.key())) << it.key() << it.value().toString();
  }
  void quantized_checkpoints_match_cpu() {
    LATHE_REQUIRE_GPU();
    QFETCH(QString, model);
    QFETCH(QString, twin);
    auto m = load_fixture("../formats/" + model.toStdString());
    auto t = load_fixture("../formats/" + twin.toStdString());
    LATHE_QVERIFY_RESULT(m);
    LATHE_QVERIFY_RESULT(t);
    auto gpu = make_cuda(m.value(), 64, false);
    auto gpu_twin = make_cuda(t.value(), 64, false);
    LATHE_QVERIFY_RESULT(gpu);
    LATHE_QVERIFY_RESULT(gpu_twin);
    // FP8 checkpoints with per-tensor scales run W8A8 above batch 8 on GPUs with FP8 tensor cores
    // (linear.h): the prompt's activations are rounded to e4m3 (3 mantissa bits, one scale per
    // product), which the CPU reference and the 16-bit twin do not do, hence their wider tolerance.
    const bool w8a8 = model == "ct_fp8_tensor" || model == "fp8_static";
    const double err = lockstep_logit_error(m.value(), *gpu.value(), 4);
    qInfo("%s: worst relative logit error against the CPU %.3g", qPrintable(model), err);
    QVERIFY2(err <= (w8a8 ? 1.5e-1 : 5e-2),
             qPrintable(QString("logits relative error %1").arg(err)));
    expect_same_logits(m.value(), *gpu.value(), *gpu_twin.value(), 3, w8a8 ? 1e-1 : 2e-2);
  }

  // What the kernels cannot take is refused at load with the tensor and the reason.
  // Group size 16 (GPTQModel's dynamic override, a compressed-tensors group): the kernels take
  // multiples of 32, as vLLM's Marlin kernels take 32/64/128/channel.
  void unsupported_group_size_is_refused_data() {
    QTest::addColumn<QString>("model");
    for (const QString& f : kGroup16Fixtures) QTest::newRow(qPrintable(f)) << f;
  }
  void unsupported_group_size_is_refused() {
    LATHE_REQUIRE_GPU();
    QFETCH(QString, model);
    auto m = load_fixture("../formats/" + model.toStdString());
    LATHE_QVERIFY_RESULT(m);
    auto gpu = make_cuda(m.value(), 64, false);
    QCOMPARE(gpu.status().code(), ErrorCode::kUnsupported);
    QVERIFY2(gpu.status().message().find("group size 16") != std::string::npos,
             gpu.status().message().c_str());
  }

  // GGUF projections kept in their blocks (quant_linear.h) compute what the same weights
  // dequantized at upload compute, in less device memory.
  void stored_formats_match_dequantized_upload() {
    LATHE_REQUIRE_GPU();
    auto m = gguf_quantized_fixture("qwen3_untied_bf16");
    LATHE_QVERIFY_RESULT(m);
    CudaSwitches dense;
    dense.native_formats = false;
    auto stored = make_cuda(m.value(), 64, false);
    auto dequantized = make_cuda(m.value(), 64, false, 1, dense);
    LATHE_QVERIFY_RESULT(stored);
    LATHE_QVERIFY_RESULT(dequantized);
    // Against the CPU reference first: projections in their blocks, mixed within one projection.
    const double err = lockstep_logit_error(m.value(), *stored.value(), 5);
    qInfo("GGUF-quantized fixture: worst relative logit error against the CPU %.3g", err);
    QVERIFY2(err <= 5e-2, qPrintable(QString("logits relative error %1").arg(err)));
    QVERIFY2(stored.value()->memory_info().weight_bytes <
                 dequantized.value()->memory_info().weight_bytes,
             qPrintable(QString("%1 vs %2")
                            .arg(stored.value()->memory_info().weight_bytes)
                            .arg(dequantized.value()->memory_info().weight_bytes)));
    expect_same_logits(m.value(), *stored.value(), *dequantized.value(), 3, 1e-2);
  }

  // GGUF Q8_0 / Q4_0 projections converted at upload into the integer row layout (gguf_repack.h,
  // the default) compute what the same parts kept in their blocks (LATHE_CUDA_GGUF_REPACK=0)
  // compute, in the same bytes (up to each piece's 256-byte alignment); the projections mix
  // converted parts with parts of other types left in their blocks.
  void gguf_repack_matches_blocks() {
    LATHE_REQUIRE_GPU();
    auto m = gguf_quantized_fixture("qwen3_untied_bf16");
    LATHE_QVERIFY_RESULT(m);
    CudaSwitches blocks;
    blocks.gguf_repack = false;
    auto repacked = make_cuda(m.value(), 64, false);
    auto kept = make_cuda(m.value(), 64, false, 1, blocks);
    LATHE_QVERIFY_RESULT(repacked);
    LATHE_QVERIFY_RESULT(kept);
    const double err = lockstep_logit_error(m.value(), *repacked.value(), 5);
    qInfo(
        "GGUF-quantized fixture, q8_0 / q4_0 as integer rows: worst relative logit error "
        "against the CPU %.3g",
        err);
    QVERIFY2(err <= 5e-2, qPrintable(QString("logits relative error %1").arg(err)));
    const int64_t a = repacked.value()->memory_info().weight_bytes,
                  b = kept.value()->memory_info().weight_bytes;
    // Each converted part: at most 256 bytes more (its scales start on a 256-byte boundary).
    const int64_t parts = 7 * m.value().config.num_layers + 1;
    QVERIFY2(a >= b - 256 * parts && a <= b + 256 * parts,
             qPrintable(QString("%1 bytes as integer rows, %2 as blocks").arg(a).arg(b)));
    expect_same_logits(m.value(), *repacked.value(), *kept.value(), 3, 1e-2);
  }

  // Host side: the parts of a GGUF dummy are those of a file of that type (types per tensor, the
  // LM head, the bytes of the blocks), and the kernels' checks take them.
  void dummy_gguf_parts_are_planned_like_a_file() {
    QTemporaryDir dir;
    auto m = load_dummy("llama-3.1-8b", "q4_k_m", dir.path());
    LATHE_QVERIFY_RESULT(m);
    const ModelConfig& c = m.value().config;
    auto dq = cuda::dummy_quant_weights(m.value());
    LATHE_QVERIFY_RESULT(dq);
    QCOMPARE(dq.value().description,
             std::string("q4_k+q6_k layer projections of random codes, LM head q6_k"));
    QCOMPARE(static_cast<int64_t>(dq.value().layers.size()), c.num_layers);
    const int64_t h = c.hidden_size, kv = c.kv_size(), ffn = c.intermediate_size;
    // llama.cpp's Q4_K_M: attn_v and ffn_down in q6_k where use_more_bits (16 of 32 layers).
    int64_t expected = c.vocab_size * h / 256 * 210;  // the LM head, q6_k
    for (int64_t i = 0; i < c.num_layers; ++i) {
      const bool more = i < 4 || i >= 28 || (i - 4) % 3 == 2;
      const LayerWeights& l = dq.value().layers[static_cast<size_t>(i)];
      QCOMPARE(l.qkv.parts[2].format, WeightFormat::kGguf);
      QCOMPARE(l.qkv.parts[2].dtype, more ? DType::kQ6_K : DType::kQ4_K);
      QCOMPARE(l.down.parts[0].dtype, more ? DType::kQ6_K : DType::kQ4_K);
      QCOMPARE(l.gate_up.parts[1].dtype, DType::kQ4_K);
      const int64_t q6 = more ? kv * h + h * ffn : 0;
      const int64_t all = (c.q_size() + 2 * kv) * h + h * c.q_size() + 3 * h * ffn;
      expected += (all - q6) / 256 * 144 + q6 / 256 * 210;
    }
    QCOMPARE(dq.value().lm_head.parts.size(), size_t{1});
    QCOMPARE(dq.value().lm_head.parts[0].dtype, DType::kQ6_K);
    auto bytes = planned_bytes(dq.value());
    LATHE_QVERIFY_RESULT(bytes);
    QCOMPARE(bytes.value(), expected);
    qInfo("q4_k_m dummy Llama-3.1-8B: %.3f GB of projections and LM head", expected / 1e9);

    // q8_0 keeps its LM head in q8_0; a tied model reads its 16-bit embedding; a width q4_k does
    // not divide (Qwen2.5-0.5B's 896) falls back to q5_0 as in llama.cpp; fp8 keeps the head
    // 16-bit.
    struct Case {
      const char* config;
      const char* q;
      const char* description;
    };
    for (const Case& k : {
             Case{"llama-3.1-8b", "q8_0", "q8_0 layer projections of random codes, LM head q8_0"},
             Case{"llama-3.1-8b", "q4_0", "q4_0 layer projections of random codes, LM head q6_k"},
             Case{"llama-3.1-8b", "q6_k", "q6_k layer projections of random codes, LM head q6_k"},
             Case{"llama-3.1-8b", "q4_k", "q4_k layer projections of random codes, LM head q6_k"},
             Case{"qwen2.5-0.5b", "q4_k_m",
                  "q5_0+q6_k+q4_k+q8_0 layer projections of random codes, LM head tied"},
             Case{"llama-3.1-8b", "fp8",
                  "fp8 per-tensor layer projections of random codes, LM head 16-bit"},
         }) {
      auto mk = load_dummy(k.config, k.q, dir.path());
      LATHE_QVERIFY_RESULT(mk);
      auto d = cuda::dummy_quant_weights(mk.value());
      LATHE_QVERIFY_RESULT(d);
      QVERIFY2(d.value().description == k.description,
               qPrintable(QString("%1 %2: %3")
                              .arg(k.config, k.q, QString::fromStdString(d.value().description))));
      LATHE_QVERIFY_RESULT(planned_bytes(d.value()));
    }
  }

  // On the GPU: a 2-layer Llama-3.1-8B shape in each GGUF dummy type (Q4_K_M: layer 0 q4_k, layer 1
  // with q6_k attn_v and ffn_down) loads in the planned bytes and decodes finite, varied logits.
  void dummy_gguf_models_decode_data() {
    QTest::addColumn<QString>("q");
    for (const char* q : {"q4_k_m", "q4_k", "q4_0", "q8_0", "q5_k_m", "q6_k"})
      QTest::newRow(q) << QString(q);
  }
  void dummy_gguf_models_decode() {
    LATHE_REQUIRE_GPU();
    QFETCH(QString, q);
    QTemporaryDir dir;
    auto m = load_dummy("llama-3.1-8b", q.toStdString(), dir.path(), 2);
    LATHE_QVERIFY_RESULT(m);
    const ModelConfig& c = m.value().config;
    auto dq = cuda::dummy_quant_weights(m.value());
    LATHE_QVERIFY_RESULT(dq);
    auto planned = planned_bytes(dq.value());
    LATHE_QVERIFY_RESULT(planned);
    auto gpu = make_cuda(m.value(), 64, false);
    LATHE_QVERIFY_RESULT(gpu);
    // Resident: the planned parts, the 16-bit embedding and the norms (each piece 256-aligned).
    const int64_t resident = gpu.value()->memory_info().weight_bytes;
    const int64_t floor = planned.value() + c.vocab_size * c.hidden_size * 2;
    QVERIFY2(resident >= floor && resident < floor + (1 << 20),
             qPrintable(QString("%1 bytes resident, %2 planned").arg(resident).arg(floor)));
    const int64_t v = c.vocab_size;
    const auto prompts = synthetic_prompts(v);
    Batch b(prompts);
    for (int step = 0; step < 4; ++step) {
      const ModelInput in = b.step(16);
      auto logits = gpu.value()->compute_logits(in);
      LATHE_QVERIFY_RESULT(logits);
      std::vector<TokenId> next;
      for (size_t s = 0; s < prompts.size(); ++s) {
        const std::vector<float> row = row_of(logits.value(), s, v);
        float lo = row[0], hi = row[0];
        for (float x : row) {
          QVERIFY2(std::isfinite(x),
                   qPrintable(QString("step %1: a logit is %2").arg(step).arg(x)));
          lo = std::min(lo, x);
          hi = std::max(hi, x);
        }
        QVERIFY2(hi > lo, qPrintable(QString("step %1: constant logits %2").arg(step).arg(lo)));
        next.push_back(argmax(row.data(), v));
      }
      b.advance(next);
    }
  }

  // GGUF dummies live in their blocks: with LATHE_CUDA_NATIVE_FORMATS=0 they are refused, saying
  // so.
  void dummy_gguf_needs_native_formats() {
    LATHE_REQUIRE_GPU();
    QTemporaryDir dir;
    auto m = load_dummy("llama-3.1-8b", "q4_k_m", dir.path(), 1);
    LATHE_QVERIFY_RESULT(m);
    CudaSwitches dense;
    dense.native_formats = false;
    auto gpu = make_cuda(m.value(), 64, false, 1, dense);
    QVERIFY(!gpu.is_ok());
    QCOMPARE(gpu.status().code(), ErrorCode::kUnsupported);
    QVERIFY2(gpu.status().message().find("LATHE_CUDA_NATIVE_FORMATS=0") != std::string::npos,
             gpu.status().message().c_str());
  }
};

QTEST_GUILESS_MAIN(CudaRunnerQuantTest)
#include "cuda_runner_quant_test.moc"
