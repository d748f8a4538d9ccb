// `lathe quantize CONFIG_DIR --load-format dummy` as a library call: random weights of a config's
// shape (dummy_weights.h) generated when read, the same for every read and slice; the calibrated
// schemes on random token ids (random_calibration()); outputs without tokenizer files; the bad
// input (no config.json, a GGUF file, --calibration); and --no-resume (no work folder, the same
// output).
#include <QtTest>

#include <QTemporaryDir>

#include <cmath>
#include <filesystem>
#include <set>

#include "engine/core/half.h"
#include "engine/core/read_file.h"
#include "engine/model/tensor_names.h"
#include "engine/quant/dummy_weights.h"
#include "engine/quant/quantize_model.h"
#include "quant_model_util.h"

using namespace lathe;
namespace fs = std::filesystem;

namespace {

bool contains(const Status& s, const std::string& needle) {
  return s.message().find(needle) != std::string::npos;
}

const char* const kTokenizerFiles[] = {"tokenizer.json", "tokenizer.model", "tokenizer_config.json",
                                       "special_tokens_map.json"};

}  // namespace

class QuantizeDummyTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;
  std::string llama_;  // config.json only: 2 layers, hidden 256
  std::string qwen2_;  // config.json only, with q/k/v biases
  int next_ = 0;

  std::string fresh_output() { return dir_.filePath("out%1").arg(next_++).toStdString(); }

  QuantizeRequest dummy_request(const std::string& scheme) {
    QuantizeRequest r;
    r.model = llama_;
    r.output = fresh_output();
    r.load_format = LoadFormat::kDummy;
    r.scheme.scheme = scheme;
    r.scheme.group_size = 64;
    r.calibration.num_samples = 8;
    r.calibration.seq_len = 32;
    return r;
  }

  Result<QuantizeResult> run(const QuantizeRequest& r) {
    LATHE_ASSIGN_OR_RETURN(std::unique_ptr<QuantizeJob> job, QuantizeJob::prepare(r));
    return job->run(nullptr, nullptr);
  }

 private slots:
  void initTestCase() {
    llama_ = dir_.filePath("llama").toStdString();
    LATHE_QVERIFY_OK(test::write_synthetic_config(llama_, {}));
    test::SyntheticModel q;
    q.arch = "qwen2";
    qwen2_ = dir_.filePath("qwen2").toStdString();
    LATHE_QVERIFY_OK(test::write_synthetic_config(qwen2_, q));
  }

  void dummy_weights_are_a_function_of_name_and_index() {
    auto src = QuantSource::open(qwen2_, LoadFormat::kDummy);
    LATHE_QVERIFY_RESULT(src);
    const DummyWeights w(src.value().config());
    const std::vector<ExpectedTensor> expected = expected_tensors(src.value().config());
    QVERIFY(!expected.empty());
    for (const ExpectedTensor& t : expected) QCOMPARE(w.shape(t.name), t.shape);
    auto q = w.read("blk.0.attn_q");
    LATHE_QVERIFY_RESULT(q);
    auto again = w.read("blk.0.attn_q");
    LATHE_QVERIFY_RESULT(again);
    QVERIFY(q.value() == again.value());
    // A slice that starts and ends inside a Philox counter's four values.
    std::vector<float> slice(37);
    LATHE_QVERIFY_OK(w.read("blk.0.attn_q", 5, 37, slice.data()));
    QVERIFY(std::equal(slice.begin(), slice.end(), q.value().begin() + 5));
    // Another tensor of the same shape has other values.
    auto o = w.read("blk.0.attn_output");
    LATHE_QVERIFY_RESULT(o);
    QVERIFY(o.value() != q.value());
    auto norm = w.read("blk.1.ffn_norm");
    LATHE_QVERIFY_RESULT(norm);
    for (float v : norm.value()) QCOMPARE(v, 1.0f);
    auto bias = w.read("blk.0.attn_q_bias");
    LATHE_QVERIFY_RESULT(bias);
    for (float v : bias.value()) QCOMPARE(v, 0.0f);
  }

  void dummy_weights_are_normal_and_bf16() {
    auto src = QuantSource::open(llama_, LoadFormat::kDummy);
    LATHE_QVERIFY_RESULT(src);
    const DummyWeights w(src.value().config());
    auto e = w.read("blk.0.ffn_up");  // 512 x 256
    LATHE_QVERIFY_RESULT(e);
    double sum = 0, sq = 0;
    int64_t beyond_3sigma = 0;
    for (float v : e.value()) {
      QCOMPARE(bf16_to_f32(f32_to_bf16(v)), v);
      QVERIFY(std::isfinite(v));
      sum += v;
      sq += static_cast<double>(v) * v;
      if (std::fabs(v) > 3 * kDummyWeightStd) ++beyond_3sigma;
    }
    const double n = static_cast<double>(e.value().size());
    const double mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
    QVERIFY2(std::fabs(mean) < 2e-4, qPrintable(QString::number(mean)));
    QVERIFY2(std::fabs(sd - kDummyWeightStd) < 5e-4, qPrintable(QString::number(sd)));
    // A normal has 0.27% beyond 3 sigma (a uniform of that std none).
    QVERIFY2(beyond_3sigma > n * 0.0015 && beyond_3sigma < n * 0.004,
             qPrintable(QString::number(beyond_3sigma)));
  }

  void dummy_weights_refuse_names_and_ranges() {
    auto src = QuantSource::open(llama_, LoadFormat::kDummy);
    LATHE_QVERIFY_RESULT(src);
    const DummyWeights w(src.value().config());
    float v[4];
    QCOMPARE(w.read("blk.9.attn_q", 0, 1, v).code(), ErrorCode::kNotFound);
    QCOMPARE(w.read("blk.0.attn_norm", 250, 7, v).code(), ErrorCode::kInvalidArgument);
    QCOMPARE(w.read("blk.0.attn_norm", -1, 2, v).code(), ErrorCode::kInvalidArgument);
  }

  void a_dummy_source_reads_through_the_generator() {
    auto src = QuantSource::open(llama_ + "/config.json", LoadFormat::kDummy);  // the file works
    LATHE_QVERIFY_RESULT(src);
    const QuantSource& s = src.value();
    QVERIFY(s.is_dummy());
    QVERIFY(!s.is_gguf());
    QVERIFY(s.model().weights.tensors().empty());  // nothing held
    QCOMPARE(s.weight_dtype(), DType::kBF16);
    QVERIFY(s.has("output"));
    QVERIFY(!s.has("blk.2.attn_q"));
    QCOMPARE(s.shape("token_embd"), (std::vector<int64_t>{300, 256}));
    auto table = s.read("token_embd");
    LATHE_QVERIFY_RESULT(table);
    auto rows = s.read_rows("token_embd", {7, 0, 299, 7});
    LATHE_QVERIFY_RESULT(rows);
    const int64_t k = 256;
    const int ids[] = {7, 0, 299, 7};
    for (int i = 0; i < 4; ++i)
      QVERIFY(std::equal(rows.value().begin() + i * k, rows.value().begin() + (i + 1) * k,
                         table.value().begin() + ids[i] * k));
    QVERIFY(!s.read_rows("token_embd", {300}).is_ok());
  }

  void random_calibration_is_repeatable_and_in_the_vocabulary() {
    CalibrationConfig c;
    c.num_samples = 5;
    c.seq_len = 9;
    const CalibrationSet a = random_calibration(c, 300), b = random_calibration(c, 300);
    QCOMPARE(a.samples, b.samples);
    QCOMPARE(a.samples.size(), size_t{5});
    QCOMPARE(a.num_tokens(), int64_t{45});
    QCOMPARE(a.format, CalibrationFormat::kRandom);
    std::set<TokenId> seen;
    for (const auto& s : a.samples)
      for (TokenId t : s) {
        QVERIFY(t >= 0 && t < 300);
        seen.insert(t);
      }
    QVERIFY(seen.size() > 30);  // not a constant
    QVERIFY(a.samples[0] != a.samples[1]);
  }

  void gptq_on_dummy_weights_writes_a_checkpoint_without_tokenizer() {
    QuantizeRequest r = dummy_request("gptq");
    r.scheme.desc_act = true;
    auto q = run(r);
    LATHE_QVERIFY_RESULT(q);
    QCOMPARE(q.value().device.rfind("cpu (", 0), size_t{0});
    QCOMPARE(q.value().peak_device_bytes, int64_t{0});
    bool noted = false;
    for (const std::string& n : q.value().notes)
      noted |=
          n.find("calibrated on 8 samples, 256 tokens (random token ids)") != std::string::npos;
    QVERIFY(noted);
    for (const char* f : {"config.json", "model.safetensors", "quantize_config.json"})
      QVERIFY2(fs::exists(r.output + "/" + f), f);
    for (const char* f : kTokenizerFiles) QVERIFY2(!fs::exists(r.output + "/" + f), f);
    QVERIFY(!fs::exists(r.output + ".partial"));
    LoadOptions lo;
    lo.load_tokenizer = false;
    auto loaded = load_model(r.output, lo);
    LATHE_QVERIFY_RESULT(loaded);
    QVERIFY(loaded.value().quantization.quantized());
    QCOMPARE(loaded.value().config.num_layers, int64_t{2});
    // The same command writes the same bytes.
    QuantizeRequest again = r;
    again.output = fresh_output();
    LATHE_QVERIFY_RESULT(run(again));
    QVERIFY(test::read_file_bytes(r.output + "/model.safetensors") ==
            test::read_file_bytes(again.output + "/model.safetensors"));
  }

  void other_schemes_take_dummy_weights() {
    for (const char* scheme : {"awq", "fp8-dynamic", "rtn", "q8_0"}) {
      QuantizeRequest r = dummy_request(scheme);
      if (std::string(scheme) == "q8_0") r.output += ".gguf";
      if (std::string(scheme) != "awq" && std::string(scheme) != "rtn") r.scheme.group_size = 0;
      auto q = run(r);
      QVERIFY2(q.is_ok(), (std::string(scheme) + ": " + q.status().message()).c_str());
      QCOMPARE(q.value().device.empty(), std::string(scheme) != "awq");  // only awq calibrates
      LoadOptions lo;
      lo.load_tokenizer = false;
      auto loaded = load_model(r.output, lo);
      QVERIFY2(loaded.is_ok(), (std::string(scheme) + ": " + loaded.status().message()).c_str());
    }
  }

  void bad_dummy_sources_are_refused_data() {
    QTest::addColumn<QString>("model");
    QTest::addColumn<int>("code");
    QTest::addColumn<QString>("expected");
    QTest::newRow("no config.json")
        << dir_.path() << static_cast<int>(ErrorCode::kNotFound) << "has no config.json";
    QTest::newRow("gguf file") << QString::fromStdString(
                                      test::fixture_path("model/tiny_llama.gguf"))
                               << static_cast<int>(ErrorCode::kInvalidArgument) << "is a GGUF file";
    QTest::newRow("missing") << QString::fromStdString(qwen2_ + "/../llama/config.json.txt")
                             << static_cast<int>(ErrorCode::kNotFound) << "no such file or folder";
  }
  void bad_dummy_sources_are_refused() {
    QFETCH(QString, model);
    QFETCH(int, code);
    QFETCH(QString, expected);
    for (const char* scheme : {"gptq", "fp8-dynamic"}) {
      QuantizeRequest r = dummy_request(scheme);
      if (std::string(scheme) == "fp8-dynamic") r.scheme.group_size = 0;
      r.model = model.toStdString();
      auto job = QuantizeJob::prepare(r);
      QVERIFY(!job.is_ok());
      QVERIFY2(static_cast<int>(job.status().code()) == code, job.status().message().c_str());
      QVERIFY2(contains(job.status(), expected.toStdString()), job.status().message().c_str());
      QVERIFY(!fs::exists(r.output));
    }
  }

  void a_file_that_is_not_a_config_is_refused() {
    const std::string file = dir_.filePath("notes.txt").toStdString();
    LATHE_QVERIFY_OK(write_small_file(file, "not a config"));
    auto src = QuantSource::open(file, LoadFormat::kDummy);
    QVERIFY(!src.is_ok());
    QCOMPARE(src.status().code(), ErrorCode::kInvalidArgument);
    QVERIFY2(contains(src.status(), "is not a folder"), src.status().message().c_str());
  }

  void dummy_calibration_flags_are_checked() {
    QuantizeRequest r = dummy_request("gptq");
    r.calibration.file = llama_ + "/config.json";
    auto job = QuantizeJob::prepare(r);
    QVERIFY(!job.is_ok());
    QVERIFY2(contains(job.status(), "--load-format dummy reads no tokenizer"),
             job.status().message().c_str());
    r.calibration.file.clear();
    r.calibration.num_samples = 0;
    job = QuantizeJob::prepare(r);
    QVERIFY(!job.is_ok());
    QVERIFY2(contains(job.status(), "--num-samples must be >= 1"), job.status().message().c_str());
  }

  void no_resume_keeps_no_work_folder_and_writes_the_same_output() {
    QuantizeRequest r = dummy_request("gptq");
    r.resumable = false;
    r.stop_after_layers = 1;
    auto stopped = run(r);
    QVERIFY(!stopped.is_ok());
    QCOMPARE(stopped.status().code(), ErrorCode::kCancelled);
    QVERIFY(!fs::exists(r.output + ".partial"));
    QVERIFY(!fs::exists(r.output));
    QVERIFY2(!contains(stopped.status(), "run the same command again to resume"),
             stopped.status().message().c_str());
    r.stop_after_layers = -1;
    LATHE_QVERIFY_RESULT(run(r));
    QVERIFY(!fs::exists(r.output + ".partial"));
    QuantizeRequest resumable = dummy_request("gptq");
    resumable.stop_after_layers = 1;  // leaves a work folder ...
    QVERIFY(!run(resumable).is_ok());
    QVERIFY(fs::exists(resumable.output + ".partial"));
    resumable.stop_after_layers = -1;  // ... that the next run resumes from
    auto resumed = run(resumable);
    LATHE_QVERIFY_RESULT(resumed);
    QCOMPARE(resumed.value().resumed_layers, int64_t{1});
    QVERIFY(test::read_file_bytes(r.output + "/model.safetensors") ==
            test::read_file_bytes(resumable.output + "/model.safetensors"));
  }
};

QTEST_GUILESS_MAIN(QuantizeDummyTest)
#include "quantize_dummy_test.moc"
