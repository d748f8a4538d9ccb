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
  Result<CalibTensorPtr> alloc(int64_t rows, int64_t cols) override {
    LATHE_RETURN_IF_ERROR(count("alloc"));
    return cpu_->alloc(rows, cols);
  }
  Status upload(const float* host, CalibTensor& t) override {
    LATHE_RETURN_IF_ERROR(count("upload"));
    return cpu_->upload(host, t);
  }
  Status download(const CalibTensor& t, int64_t row0, int64_t n, float* host) override {
    LATHE_RETURN_IF_ERROR(count("download"));
    return cpu_->download(t, row0, n, host);
  }
  Result<CalibTensorPtr> gather_rows(const CalibTensor& x,
                                     const std::vector<int64_t>& rows) override {
    LATHE_RETURN_IF_ERROR(count("gather_rows"));
    return cpu_->gather_rows(x, rows);
  }
  Status rms_norm(const CalibTensor& x, int64_t width, const std::vector<float>& w, float eps,
                  CalibTensor& out) override {
    LATHE_RETURN_IF_ERROR(count("rms_norm"));
    return cpu_->rms_norm(x, width, w, eps, out);
  }
  Status rope(CalibTensor& x, int64_t heads, int64_t head_dim, const CalibTensor& c,
              const CalibTensor& s, RopeStyle style) override {
    LATHE_RETURN_IF_ERROR(count("rope"));
    return cpu_->rope(x, heads, head_dim, c, s, style);
  }
  Status add(CalibTensor& x, const CalibTensor& y) override {
    LATHE_RETURN_IF_ERROR(count("add"));
    return cpu_->add(x, y);
  }
  Status divide_columns(CalibTensor& x, const std::vector<float>& s) override {
    LATHE_RETURN_IF_ERROR(count("divide_columns"));
    return cpu_->divide_columns(x, s);
  }
  Status linear(const CalibTensor& x, const CalibLinear& l, CalibTensor& y) override {
    LATHE_RETURN_IF_ERROR(count("linear"));
    return cpu_->linear(x, l, y);
  }
  Status mlp_act(const CalibTensor& x, const CalibLinear& gate, const CalibLinear& up,
                 CalibTensor& m) override {
    LATHE_RETURN_IF_ERROR(count("mlp_act"));
    return cpu_->mlp_act(x, gate, up, m);
  }
  Status attention(const CalibLayout& layout, const CalibAttentionShape& shape,
                   const CalibTensor& q, const CalibTensor& k, const CalibTensor& v,
                   CalibTensor& out) override {
    LATHE_RETURN_IF_ERROR(count("attention"));
    return cpu_->attention(layout, shape, q, k, v, out);
  }
  Result<std::vector<double>> hessian(const CalibTensor& x, int64_t n) override {
    LATHE_RETURN_IF_ERROR(count("hessian"));
    return cpu_->hessian(x, n);
  }
  Result<GptqResult> gptq(const float* w, int64_t rows, int64_t cols, const std::vector<double>& h,
                          const GptqConfig& config) override {
    LATHE_RETURN_IF_ERROR(count("gptq"));
    return cpu_->gptq(w, rows, cols, h, config);
  }
  Status linear_t(const CalibTensor& x, const CalibTensor& w, CalibTensor& y) override {
    LATHE_RETURN_IF_ERROR(count("linear_t"));
    return cpu_->linear_t(x, w, y);
  }
  Status awq_fake_quantize(const CalibTensor& w, const std::vector<float>& s,
                           const IntQuantConfig& quant, CalibTensor& out) override {
    LATHE_RETURN_IF_ERROR(count("awq_fake_quantize"));
    return cpu_->awq_fake_quantize(w, s, quant, out);
  }
  Result<std::vector<float>> awq_clip(const CalibTensor& w, const CalibTensor& xs,
                                      const AwqConfig& config) override {
    LATHE_RETURN_IF_ERROR(count("awq_clip"));
    return cpu_->awq_clip(w, xs, config);
  }
  Result<std::vector<float>> column_abs_mean(const CalibTensor& x, int64_t n) override {
    LATHE_RETURN_IF_ERROR(count("column_abs_mean"));
    return cpu_->column_abs_mean(x, n);
  }
  Result<double> squared_difference(const CalibTensor& a, const CalibTensor& b) override {
    LATHE_RETURN_IF_ERROR(count("squared_difference"));
    return cpu_->squared_difference(a, b);
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
    // The scale grid's candidates and the clip search on the ops: 20 alphas for each linear of
    // the q/k/v, o (when v feeds o), gate/up and down groups; 5 clipped linears a block.
    QVERIFY(awq_ops.calls["awq_fake_quantize"] >= 2 * 20 * (3 + 2 + 1));
    QCOMPARE(awq_ops.calls["awq_clip"], 2 * 5);
  }

  // The batch's activations are allocated when the quantizer is made: a device that cannot hold
  // them fails there (before any block), with its message, for every allocation of the set.
  void activations_that_do_not_fit_fail_before_the_first_block() {
    for (int at = 1; at <= 9; ++at) {  // x, then the eight activations of a block
      CountingOps ops;
      ops.fail_op = "alloc";
      ops.fail_at = at;
      const Status s = quantize_all("gptq", ops);
      QVERIFY2(!s.is_ok(), qPrintable(QString("allocation %1 was not made up front").arg(at)));
      QCOMPARE(s.code(), ErrorCode::kResourceExhausted);
      QCOMPARE(ops.calls["linear"], 0);  // no work was done
    }
  }

  // --device auto goes on on the CPU when a GPU cannot hold the activations; nothing else does.
  void auto_falls_back_only_when_the_gpu_is_too_small() {
    auto device = [](const char* text) { return parse_quant_device(text).value(); };
    const Status oom(ErrorCode::kResourceExhausted,
                     "cuda:0: the tensor [65536, 14336] does not fit");
    QVERIFY(!quant_device_falls_back(device("auto"), false, oom));  // already the CPU
    QVERIFY(quant_device_falls_back(device("auto"), true, oom));
    QVERIFY(!quant_device_falls_back(device("cuda"), true, oom));  // an explicit GPU keeps it
    QVERIFY(!quant_device_falls_back(device("cuda:0"), true, oom));
    QVERIFY(!quant_device_falls_back(device("auto"), true, Status(ErrorCode::kInternal, "cuBLAS")));
    // The choice says whether its ops are a GPU's: the CPU's never are.
    Result<QuantDeviceChoice> cpu = open_quant_device(device("cpu"));
    LATHE_QVERIFY_RESULT(cpu);
    QVERIFY(!cpu.value().gpu);
    Result<QuantDeviceChoice> fallback = open_quant_device(device("auto"));  // no plugin here
    LATHE_QVERIFY_RESULT(fallback);
    QVERIFY(!fallback.value().gpu);
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
    // The tensor ops: the forward's norms, RoPE and adds, the sampled rows, the AWQ statistics
    // and column scaling, the output errors, a late allocation.
    for (const char* scheme : {"gptq", "awq"}) {
      QTest::addRow("%s rms_norm 3", scheme) << scheme << "rms_norm" << 3;
      QTest::addRow("%s rope 4", scheme) << scheme << "rope" << 4;
      QTest::addRow("%s add 2", scheme) << scheme << "add" << 2;
      QTest::addRow("%s gather_rows 5", scheme) << scheme << "gather_rows" << 5;
      QTest::addRow("%s squared_difference 3", scheme) << scheme << "squared_difference" << 3;
      QTest::addRow("%s alloc 20", scheme) << scheme << "alloc" << 20;
    }
    QTest::newRow("awq column_abs_mean 2") << "awq"
                                           << "column_abs_mean" << 2;
    QTest::newRow("awq divide_columns 3") << "awq"
                                          << "divide_columns" << 3;
    QTest::newRow("awq linear_t 3") << "awq"
                                    << "linear_t" << 3;
    QTest::newRow("awq awq_fake_quantize 30") << "awq"
                                              << "awq_fake_quantize" << 30;
    QTest::newRow("awq awq_clip 2") << "awq"
                                    << "awq_clip" << 2;
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
