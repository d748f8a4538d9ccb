// The CUDA model runner on quantized checkpoints, against the CPU runner (the reference):
//  - every format of tests/fixtures/formats (GPTQ v1/v2 with act-order and mislabelled zero points,
//    AWQ, compressed-tensors int4/int8/FP8, vLLM FP8 with block scales, GGUF q2_k/q3_k) runs on
//    the GPU in its format: logits against the CPU on the same checkpoint, and against the 16-bit
//    twin the fixture was made from;
//  - int4 groups of 16 inputs, which the kernels cannot take, are refused at load with the reason;
//  - GGUF projections kept in their blocks (mixed types within one projection) compute what the
//    same weights dequantized at upload compute, in less device memory.
#include <QtTest>

#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>

#include <map>
#include <string>

#include "cuda_runner_test_util.h"
#include "cuda_test_util.h"
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
};

QTEST_GUILESS_MAIN(CudaRunnerQuantTest)
#include "cuda_runner_quant_test.moc"
