// Where a calibrated quantization runs (quant_device.h) and the CalibOps seam (calib_ops.h) as the
// calibrated quantizer uses it: --device values accepted and refused by name; auto falls back to
// the CPU and says why, an explicit GPU that is not usable is an error that says to use --device
// cpu (the CUDA plugin is pointed at a file that does not exist, so this holds on a GPU machine
// too); every heavy step of gptq and awq goes through the job's CalibOps, and an error of any of
// them (a GPU out of memory) is the error of the block, not a crash.
#include <QtTest>

#include <QTemporaryDir>

#include <map>

#include "engine/quant/calib_ops.h"
#include "engine/quant/calibrated_quantizer.h"
#include "engine/quant/quant_device.h"
#include "engine/quant/quantize_model.h"
#include "engine/runtime/cuda_plugin.h"
#include "quant_model_util.h"

using namespace lathe;

namespace {

bool contains(const Status& s, const std::string& needle) {
  return s.message().find(needle) != std::string::npos;
}

// Why no GPU is usable: the missing plugin file, or (a LATHE_CUDA=OFF build, such as the
// sanitizers' `debug` preset) no CUDA backend at all.
std::string no_gpu_reason() {
  return cuda_backend::built() ? "no-such-liblathe_cuda.so" : "built with LATHE_CUDA=OFF";
}

// The CPU's CalibOps, counting the calls of each op; the call number `fail_at` of op `fail_op`
// fails with kResourceExhausted, as a GPU out of memory would.
class CountingOps final : public CalibOps {
 public:
  std::map<std::string, int> calls;
  std::string fail_op;
  int fail_at = 0;

  std::string name() const override { return "counting " + cpu_->name(); }
  Status linear(const float* x, int64_t rows, const CalibLinear& l, float* y) override {
    LATHE_RETURN_IF_ERROR(count("linear"));
    return cpu_->linear(x, rows, l, y);
  }
  Status mlp_act(const float* x, int64_t rows, const CalibLinear& gate, const CalibLinear& up,
                 float* m) override {
    LATHE_RETURN_IF_ERROR(count("mlp_act"));
    return cpu_->mlp_act(x, rows, gate, up, m);
  }
  Status attention(const CalibLayout& layout, const CalibAttentionShape& shape, const float* q,
                   const float* k, const float* v, float* out) override {
    LATHE_RETURN_IF_ERROR(count("attention"));
    return cpu_->attention(layout, shape, q, k, v, out);
  }
  Result<std::vector<double>> hessian(const float* x, int64_t n, int64_t k) override {
    LATHE_RETURN_IF_ERROR(count("hessian"));
    return cpu_->hessian(x, n, k);
  }
  Result<GptqResult> gptq(const float* w, int64_t rows, int64_t cols, const std::vector<double>& h,
                          const GptqConfig& config) override {
    LATHE_RETURN_IF_ERROR(count("gptq"));
    return cpu_->gptq(w, rows, cols, h, config);
  }

 private:
  Status count(const std::string& op) {
    if (++calls[op] == fail_at && op == fail_op)
      return Status(ErrorCode::kResourceExhausted, "out of device memory (test)");
    return Status::ok();
  }
  std::unique_ptr<CalibOps> cpu_ = make_cpu_calib_ops();
};

}  // namespace

class QuantDeviceTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;
  std::string model_;

  // Quantizes every block of the synthetic model with `scheme` on `ops`; the first error.
  Status quantize_all(const char* scheme, CalibOps& ops) {
    LATHE_ASSIGN_OR_RETURN(QuantSource src, QuantSource::open(model_));
    QuantSchemeRequest r;
    r.scheme = scheme;
    r.group_size = 64;
    LATHE_ASSIGN_OR_RETURN(QuantScheme s, resolve_quant_scheme(r, DType::kBF16));
    CalibrationConfig cc;
    cc.num_samples = 6;
    cc.seq_len = 24;
    const CalibrationSet set = random_calibration(cc, src.config().vocab_size);
    CalibratedQuantizerOptions o;
    o.holdout_samples = 1;  // the held-out forwards go through the ops too
    LATHE_ASSIGN_OR_RETURN(CalibratedQuantizer q, CalibratedQuantizer::create(src, s, set, ops, o));
    for (int64_t l = 0; l < src.config().num_layers; ++l)
      LATHE_RETURN_IF_ERROR(q.quantize_block(l, nullptr).status());
    return Status::ok();
  }

 private slots:
  void initTestCase() {
    // No CUDA plugin, whatever the machine has (read once, on the first use of the plugin).
    qputenv("LATHE_CUDA_PLUGIN", dir_.filePath("no-such-liblathe_cuda.so").toUtf8());
    model_ = dir_.filePath("model").toStdString();
    LATHE_QVERIFY_OK(test::write_synthetic_model(model_, {}));
  }

  void device_values_are_parsed() {
    auto d = parse_quant_device("auto");
    LATHE_QVERIFY_RESULT(d);
    QCOMPARE(d.value().kind, QuantDeviceKind::kAuto);
    d = parse_quant_device("cpu");
    LATHE_QVERIFY_RESULT(d);
    QCOMPARE(d.value().kind, QuantDeviceKind::kCpu);
    d = parse_quant_device("cuda");
    LATHE_QVERIFY_RESULT(d);
    QCOMPARE(d.value().kind, QuantDeviceKind::kCuda);
    QCOMPARE(d.value().index, 0);
    d = parse_quant_device("cuda:3");
    LATHE_QVERIFY_RESULT(d);
    QCOMPARE(d.value().kind, QuantDeviceKind::kCuda);
    QCOMPARE(d.value().index, 3);
  }

  void bad_device_values_name_the_accepted_ones() {
    for (const char* bad : {"bogus", "", "CUDA", "gpu", "cuda:", "cuda:-1", "cuda:x", "cuda:1x",
                            "cuda:99999999999", "cpu:0"}) {
      const auto d = parse_quant_device(bad);
      QVERIFY2(!d.is_ok(), bad);
      QCOMPARE(d.status().code(), ErrorCode::kInvalidArgument);
      QVERIFY2(contains(d.status(), "--device must be auto, cpu, cuda or cuda:N"),
               d.status().message().c_str());
      QVERIFY2(contains(d.status(), std::string("got '") + bad + "'"),
               d.status().message().c_str());
    }
  }

  void cpu_and_auto_without_a_gpu_run_on_the_cpu() {
    auto cpu = open_quant_device(parse_quant_device("cpu").value());
    LATHE_QVERIFY_RESULT(cpu);
    QVERIFY(cpu.value().ops->name().rfind("cpu (", 0) == 0);
    QVERIFY(cpu.value().reason.empty());
    QCOMPARE(cpu.value().ops->peak_device_bytes(), int64_t{0});
    auto autod = open_quant_device(parse_quant_device("auto").value());
    LATHE_QVERIFY_RESULT(autod);
    QVERIFY(autod.value().ops->name().rfind("cpu (", 0) == 0);
    QVERIFY2(autod.value().reason.rfind("--device auto: no usable GPU: ", 0) == 0,
             autod.value().reason.c_str());
    QVERIFY2(autod.value().reason.find(no_gpu_reason()) != std::string::npos,
             autod.value().reason.c_str());
  }

  void an_explicit_gpu_without_one_is_an_error() {
    for (const char* d : {"cuda", "cuda:1"}) {
      const auto r = open_quant_device(parse_quant_device(d).value());
      QVERIFY(!r.is_ok());
      QCOMPARE(r.status().code(), ErrorCode::kUnsupported);
      QVERIFY2(contains(r.status(), std::string("--device ") + d + ": "),
               r.status().message().c_str());
      QVERIFY2(contains(r.status(), no_gpu_reason()), r.status().message().c_str());
      QVERIFY2(contains(r.status(), "; use --device cpu"), r.status().message().c_str());
    }
  }

  void the_job_refuses_an_unusable_gpu_before_reading_the_model() {
    QuantizeRequest r;
    r.model = dir_.filePath("does-not-exist").toStdString();  // never opened
    r.output = dir_.filePath("out").toStdString();
    r.scheme.scheme = "gptq";
    r.scheme.group_size = 64;
    r.calibration.file = model_ + "/config.json";  // exists; never read
    r.device = "cuda";
    auto job = QuantizeJob::prepare(r);
    QVERIFY(!job.is_ok());
    QVERIFY2(contains(job.status(), "--device cuda: "), job.status().message().c_str());
    // A scheme that is not calibrated ignores the device (it gets as far as the missing model).
    r.scheme.scheme = "rtn";
    job = QuantizeJob::prepare(r);
    QVERIFY(!job.is_ok());
    QVERIFY2(contains(job.status(), "no such file or folder"), job.status().message().c_str());
    r.device = "bogus";  // ... but a device that is no device is refused for every scheme
    job = QuantizeJob::prepare(r);
    QVERIFY(!job.is_ok());
    QVERIFY2(contains(job.status(), "--device must be"), job.status().message().c_str());
  }

  void every_heavy_step_goes_through_the_jobs_ops() {
    CountingOps gptq_ops;
    LATHE_QVERIFY_OK(quantize_all("gptq", gptq_ops));
    // Per block: 4 Hessians, 7 GPTQ runs; linears and the attention of the forward.
    QCOMPARE(gptq_ops.calls["hessian"], 2 * 4);
    QCOMPARE(gptq_ops.calls["gptq"], 2 * 7);
    QVERIFY(gptq_ops.calls["linear"] > 0);
    QVERIFY(gptq_ops.calls["attention"] >= 2 * 4);  // the fit's and 3 held-out forwards per block
    QCOMPARE(gptq_ops.calls["mlp_act"], 2 * 4);     // the same four forwards' MLPs
    CountingOps awq_ops;
    LATHE_QVERIFY_OK(quantize_all("awq", awq_ops));
    QCOMPARE(awq_ops.calls["hessian"], 0);
    QCOMPARE(awq_ops.calls["gptq"], 0);
    QVERIFY(awq_ops.calls["linear"] > 0);
    QVERIFY(awq_ops.calls["attention"] >= 2 * 4);
    QVERIFY(awq_ops.calls["mlp_act"] >= 2 * 4);
  }

  void an_error_of_the_ops_is_the_error_of_the_block_data() {
    QTest::addColumn<QString>("scheme");
    QTest::addColumn<QString>("op");
    QTest::addColumn<int>("at");
    // Early and late calls: the forward, the GPTQ / AWQ search, the held-out check of block 1.
    for (const char* scheme : {"gptq", "awq"})
      for (int at : {1, 5, 40})
        QTest::addRow("%s linear %d", scheme, at) << scheme << "linear" << at;
    QTest::newRow("gptq attention 1") << "gptq"
                                      << "attention" << 1;
    QTest::newRow("gptq attention 6") << "gptq"
                                      << "attention" << 6;
    QTest::newRow("awq attention 3") << "awq"
                                     << "attention" << 3;
    QTest::newRow("gptq mlp_act 1") << "gptq"
                                    << "mlp_act" << 1;
    QTest::newRow("awq mlp_act 6") << "awq"
                                   << "mlp_act" << 6;
    QTest::newRow("gptq hessian 3") << "gptq"
                                    << "hessian" << 3;
    QTest::newRow("gptq gptq 1") << "gptq"
                                 << "gptq" << 1;
    QTest::newRow("gptq gptq 12") << "gptq"
                                  << "gptq" << 12;
  }
  void an_error_of_the_ops_is_the_error_of_the_block() {
    QFETCH(QString, scheme);
    QFETCH(QString, op);
    QFETCH(int, at);
    CountingOps ops;
    ops.fail_op = op.toStdString();
    ops.fail_at = at;
    const Status s = quantize_all(scheme.toUtf8().constData(), ops);
    QVERIFY2(!s.is_ok(), "the injected failure was not reached or was swallowed");
    QCOMPARE(s.code(), ErrorCode::kResourceExhausted);
    QVERIFY2(contains(s, "out of device memory (test)"), s.message().c_str());
    QVERIFY2(contains(s, "blk."), s.message().c_str());  // names the block
  }
};

QTEST_GUILESS_MAIN(QuantDeviceTest)
#include "quant_device_test.moc"
