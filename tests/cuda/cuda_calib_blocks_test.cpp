// Whole calibrated blocks on the GPU against the CPU: a random-weight Llama shape (dummy weights
// of a synthetic config: hidden 256, 2 KV heads of 64, MLP 512, 3 blocks) quantized block by
// block by CalibratedQuantizer (gptq 4-bit g64 with act-order; awq 4-bit g64) once on the CPU's
// CalibOps and once on the CUDA ones, from the same random calibration set with held-out samples.
// The CUDA run keeps every activation on the device, so this is the end-to-end check of the
// seam: the norms, RoPE, attention, linears, Hessians, GPTQ, AWQ's grid and clip search in the
// order the quantizer calls them. Where a linear's input is the same bits on both (block 0's q, k,
// v: the norm of the embeddings), both must give the same codes (>= 99.9%). Elsewhere the inputs
// differ by float32 summation order, and GPTQ's column loop amplifies such differences into other
// codes for values near a rounding boundary (each flipped code changes the error fed to the
// columns after it; on the H200, 2026-12-03: block 0's down projection 89%, block 1's linears
// 77-89%), so the codes are only reported there; what must agree is the quality: each block's
// output error within 5% and its held-out error (2 samples: noisy) within 25%. AWQ's next-block
// inputs are the float block's outputs, so there everything must agree: codes >= 99.9%, held-out
// errors within 1%, final hidden states relative L2 <= 1e-4.
#include <QtTest>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "engine/backend/cuda/cuda_calib_ops.h"
#include "engine/quant/calib_ops.h"
#include "engine/quant/calibrated_quantizer.h"
#include "engine/quant/calibration.h"
#include "test_support.h"

using namespace lathe;

namespace {

struct Run {
  std::vector<CalibratedBlock> blocks;
  std::vector<float> hidden;  // entering the block after the last
};

Result<Run> quantize_blocks(const std::string& folder, const char* scheme, CalibOps& ops) {
  LATHE_ASSIGN_OR_RETURN(QuantSource src, QuantSource::open(folder, LoadFormat::kDummy));
  QuantSchemeRequest r;
  r.scheme = scheme;
  r.group_size = 64;
  r.desc_act = std::string(scheme) == "gptq";
  LATHE_ASSIGN_OR_RETURN(QuantScheme s, resolve_quant_scheme(r, DType::kBF16));
  CalibrationConfig cc;
  cc.num_samples = 12;
  cc.seq_len = 96;
  const CalibrationSet set = random_calibration(cc, src.config().vocab_size);
  CalibratedQuantizerOptions o;
  o.holdout_samples = 2;
  LATHE_ASSIGN_OR_RETURN(CalibratedQuantizer q, CalibratedQuantizer::create(src, s, set, ops, o));
  Run run;
  for (int64_t l = 0; l < src.config().num_layers; ++l) {
    LATHE_ASSIGN_OR_RETURN(CalibratedBlock b, q.quantize_block(l, nullptr));
    run.blocks.push_back(std::move(b));
  }
  LATHE_ASSIGN_OR_RETURN(run.hidden, q.hidden_state());
  return run;
}

}  // namespace

class CudaCalibBlocksTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;
  std::string folder_;

 private slots:
  void initTestCase() {
    folder_ = dir_.filePath("cfg").toStdString();
    std::filesystem::create_directories(folder_);
    std::ofstream(folder_ + "/config.json")
        << R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
               "intermediate_size": 512, "num_hidden_layers": 3, "num_attention_heads": 4,
               "num_key_value_heads": 2, "vocab_size": 300, "max_position_embeddings": 256,
               "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "hidden_act": "silu",
               "tie_word_embeddings": false, "bos_token_id": 1, "eos_token_id": 2,
               "torch_dtype": "bfloat16"})";
  }

  void blocks_match_the_cpu_data() {
    QTest::addColumn<QString>("scheme");
    QTest::newRow("gptq") << "gptq";
    QTest::newRow("awq") << "awq";
  }
  void blocks_match_the_cpu() {
    LATHE_REQUIRE_GPU();
    QFETCH(QString, scheme);
    const std::string sc = scheme.toStdString();
    std::unique_ptr<CalibOps> cpu = make_cpu_calib_ops();
    Result<std::unique_ptr<CalibOps>> gpu = create_cuda_calib_ops(0);
    LATHE_QVERIFY_RESULT(gpu);
    Result<Run> want = quantize_blocks(folder_, sc.c_str(), *cpu);
    Result<Run> got = quantize_blocks(folder_, sc.c_str(), *gpu.value());
    LATHE_QVERIFY_RESULT(want);
    LATHE_QVERIFY_RESULT(got);
    QCOMPARE(got->blocks.size(), want->blocks.size());
    for (size_t b = 0; b < want->blocks.size(); ++b) {
      const CalibratedBlock& w = want->blocks[b];
      const CalibratedBlock& g = got->blocks[b];
      QCOMPARE(g.linears.size(), w.linears.size());
      for (const auto& [name, wq] : w.linears) {
        const auto it = g.linears.find(name);
        QVERIFY2(it != g.linears.end(), name.c_str());
        const IntQuantizedMatrix& gq = it->second;
        QCOMPARE(gq.codes.size(), wq.codes.size());
        size_t same = 0;
        for (size_t i = 0; i < wq.codes.size(); ++i) same += gq.codes[i] == wq.codes[i];
        const double match = static_cast<double>(same) / static_cast<double>(wq.codes.size());
        qInfo("%s %s: %.4f%% of codes identical", sc.c_str(), name.c_str(), 100.0 * match);
        const bool same_input =
            b == 0 && (name == "blk.0.attn_q" || name == "blk.0.attn_k" || name == "blk.0.attn_v");
        if (same_input || sc == "awq")
          QVERIFY2(match >= 0.999, qPrintable(QString("%1: %2").arg(name.c_str()).arg(match)));
      }
      const double out_rel =
          std::fabs(g.output_error - w.output_error) / std::max(1e-30, w.output_error);
      qInfo("%s block %zu: output error %.6g (CPU %.6g), held-out %.6g (CPU %.6g)", sc.c_str(), b,
            g.output_error, w.output_error, g.holdout.method_error, w.holdout.method_error);
      QVERIFY2(out_rel <= 0.05, qPrintable(QString("block %1 output error %2 vs %3")
                                               .arg(b)
                                               .arg(g.output_error)
                                               .arg(w.output_error)));
      QCOMPARE(g.replaced.size(), w.replaced.size());  // AWQ's folded norms
      QVERIFY(g.has_holdout && w.has_holdout);
      const double rel = std::fabs(g.holdout.method_error - w.holdout.method_error) /
                         std::max(1e-30, w.holdout.method_error);
      QVERIFY2(rel <= (sc == "awq" ? 0.01 : 0.25),
               qPrintable(QString("block %1 held-out error %2 vs %3")
                              .arg(b)
                              .arg(g.holdout.method_error)
                              .arg(w.holdout.method_error)));
    }
    double num = 0, den = 0;
    for (size_t i = 0; i < want->hidden.size(); ++i) {
      const double d = static_cast<double>(got->hidden[i]) - want->hidden[i];
      num += d * d;
      den += static_cast<double>(want->hidden[i]) * want->hidden[i];
    }
    const double rel = std::sqrt(num / std::max(den, 1e-30));
    qInfo("%s: final hidden states relative L2 %.3g", sc.c_str(), rel);
    if (sc == "awq") QVERIFY2(rel <= 1e-4, qPrintable(QString::number(rel)));
  }
};

QTEST_GUILESS_MAIN(CudaCalibBlocksTest)
#include "cuda_calib_blocks_test.moc"
