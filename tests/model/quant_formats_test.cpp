// Quantized checkpoints read natively: every fixture of tests/fixtures/formats/ (written from the
// published layouts by scripts/fixtures/make_quant_format_fixtures.py, not by Lathe) loads, names
// its format, and gives on the CPU exactly the logits of its dequantized 16-bit twin (the fixtures'
// dequantized weights are exact in f16, so the tolerance is zero), over prefill and decode, batch 1
// and three sequences. Also: the reference decoder against the twin's tensors, what `lathe
// inspect` reports, and online quantization (--quantization) at load.
#include <QtTest>

#include <QJsonDocument>
#include <QJsonObject>

#include "engine/core/half.h"
#include "engine/core/log.h"
#include "engine/model/layer_weights.h"
#include "engine/model/model_report.h"
#include "engine/model/weight_dequant.h"
#include "engine/model/weight_scheme.h"
#include "engine/quant/fp8.h"
#include "quant_fixture_util.h"

using namespace lathe;
using json = nlohmann::json;

namespace {

LoadOptions no_tokenizer() {
  LoadOptions o;
  o.load_tokenizer = false;
  return o;
}

std::string summary(const LoadedModel& m) {
  std::string s;
  for (const auto& [g, t] : m.dtype_summary) s += g + "=" + t + " ";
  return s;
}

// Captures log lines while alive.
struct LogCapture {
  std::vector<std::string> lines;
  LogCapture() {
    set_log_sink([this](LogLevel, std::string_view line) { lines.emplace_back(line); });
  }
  ~LogCapture() { set_log_sink(nullptr); }
  bool contains(const std::string& s) const {
    for (const std::string& l : lines)
      if (l.find(s) != std::string::npos) return true;
    return false;
  }
};

}  // namespace

class QuantFormatsTest : public QObject {
  Q_OBJECT

 private:
  json manifest_;

 private slots:
  void initTestCase() {
    std::ifstream in(test::formats_fixture("manifest.json"));
    QVERIFY2(in.good(), "tests/fixtures/formats/manifest.json is missing");
    manifest_ = json::parse(in);
    QVERIFY(manifest_.size() >= 17);
  }

  void logits_equal_the_dequantized_twin_data() {
    QTest::addColumn<QString>("checkpoint");
    QTest::addColumn<QString>("reference");
    QTest::addColumn<QString>("attention");  // the summary's attention format
    const std::map<std::string, std::string> attention = {
        {"gptq_g64_asym", "int4 g64 asym (gptq)"},
        {"gptq_v2_g64_asym", "int4 g64 asym (gptq)"},
        {"awq_g64", "int4 g64 asym (awq)"},
        {"ct_w4a16_asym_g64", "int4 g64 asym (compressed-tensors)"},
        {"gptq_g32_sym_desc_act", "int4 g32 act-order (gptq)"},
        {"gptq_mislabelled_v2", "int4 g32 act-order (gptq)"},
        {"ct_w4a16_sym_g32_actorder", "int4 g32 act-order (compressed-tensors)"},
        {"gptq_dynamic", "int4 g16 act-order (gptq)+int4 per-channel asym (gptq)"},
        {"ct_mixed_groups",
         "int4 g16 act-order (compressed-tensors)+int4 per-channel asym (compressed-tensors)"},
        {"ct_w8a16_channel", "int8 per-channel (compressed-tensors)"},
        {"ct_int8_naive", "int8 per-channel (compressed-tensors)"},
        {"ct_fp8_dynamic", "fp8 per-channel (compressed-tensors)"},
        {"ct_fp8_tensor", "fp8 per-tensor (compressed-tensors)"},
        {"fp8_static", "fp8 per-tensor (fp8)"},
        {"ct_fp8_block", "fp8 block 128x128 (compressed-tensors)"},
        {"fp8_block_inv", "fp8 block 128x128 (fp8)"},
        {"gguf_q2k_q3k.gguf", "f16+q2_k+q3_k"},
    };
    for (const auto& [ckpt, ref] : manifest_.items()) {
      const auto it = attention.find(ckpt);
      QTest::newRow(ckpt.c_str()) << QString::fromStdString(ckpt)
                                  << QString::fromStdString(ref.get<std::string>())
                                  << QString::fromStdString(it == attention.end() ? "?"
                                                                                  : it->second);
    }
  }
  void logits_equal_the_dequantized_twin() {
    QFETCH(QString, checkpoint);
    QFETCH(QString, reference);
    QFETCH(QString, attention);
    const std::string q = test::formats_fixture(checkpoint.toStdString());
    const std::string r = test::formats_fixture(reference.toStdString());
    Result<LoadedModel> qm = load_model(q, no_tokenizer());
    LATHE_QVERIFY_RESULT(qm);
    QCOMPARE(QString::fromStdString(qm->dtype_summary[1].second), attention);
    Result<std::vector<float>> got = test::scenario_logits(*qm);
    Result<std::vector<float>> want = test::scenario_logits(r);
    LATHE_QVERIFY_RESULT(got);
    LATHE_QVERIFY_RESULT(want);
    QCOMPARE(got->size(), want->size());
    QVERIFY(std::all_of(got->begin(), got->end(), [](float v) { return std::isfinite(v); }));
    const double d = test::max_abs_diff(*got, *want);
    QVERIFY2(d == 0.0, qPrintable(QString("max |logit diff| %1").arg(d)));
    // Not a trivial model: the logits vary.
    QVERIFY(*std::max_element(got->begin(), got->end()) -
                *std::min_element(got->begin(), got->end()) >
            0.1f);
  }

  // The reference decoder gives exactly the twin's f16 weights, projection by projection.
  void decoder_matches_the_twin_tensors_data() { logits_equal_the_dequantized_twin_data(); }
  void decoder_matches_the_twin_tensors() {
    QFETCH(QString, checkpoint);
    QFETCH(QString, reference);
    Result<LoadedModel> qm =
        load_model(test::formats_fixture(checkpoint.toStdString()), no_tokenizer());
    Result<LoadedModel> rm =
        load_model(test::formats_fixture(reference.toStdString()), no_tokenizer());
    LATHE_QVERIFY_RESULT(qm);
    LATHE_QVERIFY_RESULT(rm);
    Result<ModelWeights> qw = bind_model_weights(*qm);
    Result<ModelWeights> rw = bind_model_weights(*rm);
    LATHE_QVERIFY_RESULT(qw);
    LATHE_QVERIFY_RESULT(rw);
    int quantized = 0;
    for (LinearSlot slot :
         {LinearSlot::kQkv, LinearSlot::kO, LinearSlot::kGateUp, LinearSlot::kDown}) {
      const LinearGroup& a = qw->linear(0, slot);
      const LinearGroup& b = rw->linear(0, slot);
      for (size_t i = 0; i < a.parts.size(); ++i) {
        const std::vector<float> x = dequantize_matrix(a.parts[i]);
        const std::vector<float> y = dequantize_matrix(b.parts[i]);
        QVERIFY2(x == y, a.parts[i].name.c_str());
        quantized += a.parts[i].format != WeightFormat::kDense;
      }
    }
    QVERIFY(quantized >= 4);
  }

  // Checkpoints written by the compressed-tensors package itself
  // (scripts/fixtures/make_ct_package_fixtures.py, on a machine with torch), when present: the
  // twin holds the package's float32 fake-quantized weights.
  void compressed_tensors_package_checkpoints() {
    std::ifstream in(test::fixture_path("formats_ct_package/manifest.json"));
    if (!in.good())
      QSKIP(
          "tests/fixtures/formats_ct_package/ is absent: make it with "
          "scripts/fixtures/make_ct_package_fixtures.py on a machine with torch");
    const json m = json::parse(in);
    QVERIFY(!m["pairs"].empty());
    for (const auto& [ckpt, ref] : m["pairs"].items()) {
      Result<std::vector<float>> got =
          test::scenario_logits(test::fixture_path("formats_ct_package/" + ckpt));
      Result<std::vector<float>> want =
          test::scenario_logits(test::fixture_path("formats_ct_package/" + ref.get<std::string>()));
      LATHE_QVERIFY_RESULT(got);
      LATHE_QVERIFY_RESULT(want);
      const double err = test::relative_error(*got, *want);
      QVERIFY2(
          err < 1e-5,
          qPrintable(
              QString("%1: relative logit error %2").arg(QString::fromStdString(ckpt)).arg(err)));
    }
  }

  void mislabelled_zero_points_follow_the_data() {
    LogCapture log;
    Result<LoadedModel> m =
        load_model(test::formats_fixture("gptq_mislabelled_v2"), no_tokenizer());
    LATHE_QVERIFY_RESULT(m);
    QVERIFY(log.contains("checkpoint_format says 'gptq'"));
    Result<ModelWeights> w = bind_model_weights(*m);
    LATHE_QVERIFY_RESULT(w);
    QVERIFY(!w->layers[0].qkv.parts[0].quant.zeros_minus_one);
    // The correctly labelled checkpoint of the same grid reads its zeros minus one.
    Result<LoadedModel> v1 =
        load_model(test::formats_fixture("gptq_g32_sym_desc_act"), no_tokenizer());
    LATHE_QVERIFY_RESULT(v1);
    Result<ModelWeights> w1 = bind_model_weights(*v1);
    LATHE_QVERIFY_RESULT(w1);
    QVERIFY(w1->layers[0].qkv.parts[0].quant.zeros_minus_one);
  }

  void ignored_and_excluded_modules_stay_dense() {
    for (const char* name : {"ct_fp8_dynamic", "gptq_dynamic", "ct_mixed_groups"}) {
      Result<LoadedModel> m = load_model(test::formats_fixture(name), no_tokenizer());
      LATHE_QVERIFY_RESULT(m);
      Result<ModelWeights> w = bind_model_weights(*m);
      LATHE_QVERIFY_RESULT(w);
      QCOMPARE(w->layers[0].down.parts[0].format, WeightFormat::kDense);
      QCOMPARE(w->layers[0].qkv.parts[0].format == WeightFormat::kDense, false);
      QVERIFY2(summary(*m).find("mlp=") != std::string::npos, summary(*m).c_str());
    }
    // The untied lm_head of the FP8_DYNAMIC fixture is in compressed-tensors' ignore list.
    Result<LoadedModel> m = load_model(test::formats_fixture("ct_fp8_dynamic"), no_tokenizer());
    LATHE_QVERIFY_RESULT(m);
    QCOMPARE(QString::fromStdString(m->dtype_summary.back().second), QString("f16"));
  }

  void gptq_dynamic_overrides_per_module() {
    Result<LoadedModel> m = load_model(test::formats_fixture("gptq_dynamic"), no_tokenizer());
    LATHE_QVERIFY_RESULT(m);
    Result<ModelWeights> w = bind_model_weights(*m);
    LATHE_QVERIFY_RESULT(w);
    const LayerWeights& l = w->layers[0];
    QCOMPARE(l.qkv.parts[0].quant.bits, 4);
    QCOMPARE(l.qkv.parts[0].quant.group_size, 16);
    QCOMPARE(l.o.parts[0].quant.granularity, ScaleGranularity::kChannel);
    QVERIFY(!l.o.parts[0].quant.symmetric);
    QCOMPARE(l.gate_up.parts[0].quant.bits, 8);
    QCOMPARE(l.gate_up.parts[1].describe(), std::string("int8 per-channel"));
  }

  // `lathe inspect`: formats per group and the bytes as stored, per group.
  void report_names_formats_and_true_bytes() {
    Result<ModelReport> r = inspect_model(test::formats_fixture("gptq_g64_asym"), {});
    LATHE_QVERIFY_RESULT(r);
    const QJsonObject j =
        QJsonDocument::fromJson(QByteArray::fromStdString(model_report_json(*r))).object();
    QCOMPARE(j["dtypes"].toObject()["attention"].toString(), QString("int4 g64 asym (gptq)"));
    QCOMPARE(j["quantization"].toString(), QString("gptq"));
    const QJsonObject groups = j["memory"].toObject()["weights"].toObject()["groups"].toObject();
    // q 64x64, k 32x64, v 32x64, o 64x64 at 4 bits = 6144 bytes of codes, plus scales (f16),
    // zero points (4 bits) and g_idx (i32 per input).
    const int64_t attention = groups["attention"].toInteger();
    const int64_t codes = (64 * 64 * 2 + 32 * 64 * 2) / 2;
    const int64_t scales = 2 * (64 + 32 + 32 + 64), zeros = (64 + 32 + 32 + 64) / 2;
    const int64_t g_idx = 4 * 64 * 4;
    QCOMPARE(attention, codes + scales + zeros + g_idx);
    int64_t sum = 0;
    for (const QString& k : groups.keys()) sum += groups[k].toInteger();
    QCOMPARE(sum, j["memory"].toObject()["weights"].toObject()["stored"].toInteger());
    const std::string text = model_report_text(*r);
    QVERIFY2(text.find("attention int4 g64 asym (gptq)") != std::string::npos, text.c_str());
    // The twin holds the same weights in 16 bits: more bytes.
    Result<ModelReport> dense = inspect_model(test::formats_fixture("int4_g64_asym_ref"), {});
    LATHE_QVERIFY_RESULT(dense);
    QVERIFY(dense->memory.weight_bytes_stored > 2 * r->memory.weight_bytes_stored);
  }

  // --quantization fp8|int8|int4 on a 16-bit checkpoint: formats, the load-log line, logits near
  // the 16-bit model's, and the CPU runner's weight bytes.
  void online_quantization_data() {
    QTest::addColumn<QString>("mode");
    QTest::addColumn<QString>("format");
    QTest::addColumn<double>("tolerance");  // relative logit error against 16 bits
    QTest::newRow("fp8") << "fp8"
                         << "fp8 per-tensor" << 0.15;
    QTest::newRow("int8") << "int8"
                          << "int8 per-channel" << 0.04;
    QTest::newRow("int4") << "int4"
                          << "int4 per-channel" << 0.35;
  }
  void online_quantization() {
    QFETCH(QString, mode);
    QFETCH(QString, format);
    QFETCH(double, tolerance);
    const std::string src = test::formats_fixture("int4_g32_sym_ref");
    LoadOptions o = no_tokenizer();
    QVERIFY(parse_online_quant(mode.toStdString(), &o.quantization));
    LogCapture log;
    Result<LoadedModel> m = load_model(src, o);
    LATHE_QVERIFY_RESULT(m);
    Result<ModelWeights> w = bind_model_weights(*m);
    LATHE_QVERIFY_RESULT(w);
    QVERIFY(log.contains("--quantization " + mode.toStdString()));
    const WeightMatrix& q = w->layers[0].qkv.parts[0];
    QCOMPARE(QString::fromStdString(q.describe()), format);  // k = 64: int4 is per channel
    QCOMPARE(q.scheme, std::string("online"));
    QCOMPARE(w->lm_head.parts[0].format, WeightFormat::kDense);  // tied embedding stays
    Result<std::vector<float>> got = test::scenario_logits(*m);
    Result<std::vector<float>> want = test::scenario_logits(src);
    LATHE_QVERIFY_RESULT(got);
    LATHE_QVERIFY_RESULT(want);
    const double err = test::relative_error(*got, *want);
    qInfo("%s: relative logit error %.4f", qPrintable(mode), err);
    QVERIFY2(err < tolerance && err > 0, qPrintable(QString::number(err)));
    // fp8: exactly engine/quant's per-tensor quantization of the weights.
    if (mode == "fp8") {
      Result<LoadedModel> dense = load_model(src, no_tokenizer());
      LATHE_QVERIFY_RESULT(dense);
      Result<ModelWeights> dw = bind_model_weights(*dense);
      LATHE_QVERIFY_RESULT(dw);
      const WeightMatrix& d = dw->layers[0].qkv.parts[0];
      const std::vector<float> src_w = dequantize_matrix(d);
      const std::vector<float> want_w =
          dequantize_fp8(quantize_fp8(src_w.data(), d.n, d.k, Fp8ScaleKind::kTensor));
      QVERIFY(dequantize_matrix(q) == want_w);
    }
    // The runner holds the quantized bytes, not the 16-bit ones.
    CpuRunnerOptions ro;
    ro.num_threads = 1;
    Result<std::unique_ptr<ModelRunner>> qr = create_cpu_model_runner(*m, ro);
    Result<LoadedModel> dense = load_model(src, no_tokenizer());
    LATHE_QVERIFY_RESULT(dense);
    Result<std::unique_ptr<ModelRunner>> dr = create_cpu_model_runner(*dense, ro);
    LATHE_QVERIFY_RESULT(qr);
    LATHE_QVERIFY_RESULT(dr);
    QVERIFY((*qr)->memory_info().weight_bytes < (*dr)->memory_info().weight_bytes);
  }

  void online_int4_uses_groups_of_128() {
    std::vector<std::unique_ptr<uint8_t[]>> owned;
    std::vector<uint16_t> w(8 * 256);
    for (size_t i = 0; i < w.size(); ++i) w[i] = f32_to_bf16(std::sin(0.37f * i) * 0.1f);
    const WeightMatrix dense =
        plain_matrix("blk.0.attn_q", make_view(DType::kBF16, {8, 256}, w.data()));
    Result<WeightMatrix> q = quantize_matrix_online(dense, OnlineQuant::kInt4, &owned);
    LATHE_QVERIFY_RESULT(q);
    QCOMPARE(q->describe(), std::string("int4 g128"));
    QCOMPARE(q->bytes(), int64_t{8 * 256 / 2 + 8 * 2 * 2});
  }

  void online_quantization_of_random_weights() {
    LoadOptions o = no_tokenizer();
    o.load_format = LoadFormat::kDummy;
    o.quantization = OnlineQuant::kInt8;
    Result<LoadedModel> m = load_model(test::formats_fixture("int4_g32_sym_ref"), o);
    LATHE_QVERIFY_RESULT(m);
    Result<std::vector<float>> got = test::scenario_logits(*m);
    LATHE_QVERIFY_RESULT(got);
    QVERIFY(std::all_of(got->begin(), got->end(), [](float v) { return std::isfinite(v); }));
  }

  void online_quantization_refuses_quantized_checkpoints() {
    LoadOptions o = no_tokenizer();
    o.quantization = OnlineQuant::kFp8;
    for (const char* name : {"gptq_g64_asym", "gguf_q2k_q3k.gguf"}) {
      const Status s = load_model(test::formats_fixture(name), o).status();
      QCOMPARE(s.code(), ErrorCode::kInvalidArgument);
      QVERIFY2(s.message().find("without --quantization") != std::string::npos,
               s.message().c_str());
    }
  }
};

QTEST_GUILESS_MAIN(QuantFormatsTest)
#include "quant_formats_test.moc"
