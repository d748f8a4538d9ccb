// `lathe quantize` as a user runs it: one-line errors with exit code 1 for each kind of bad input,
// per-layer progress with an ETA, a summary, and Ctrl-C (SIGINT) stopping cleanly with exit code
// 130 and nothing left under the output name; a gptq run stopped after a block
// (LATHE_QUANTIZE_STOP_AFTER_LAYERS) resumes with the same command and writes the same files.
// --device: auto falls back to the CPU and says why, an explicit GPU that is not usable is an
// error before any work (the CUDA plugin is pointed at a missing file, so this holds on a GPU
// machine too); --load-format dummy quantizes random weights of a config.json's shape.
#include <QtTest>

#include <QProcess>
#include <QTemporaryDir>

#include <csignal>
#include <filesystem>
#include <fstream>

#include "engine/core/read_file.h"
#include "engine/runtime/cuda_plugin.h"

#include "quant_model_util.h"

namespace fs = std::filesystem;

namespace {

lathe::test::ProcessResult lathe_quantize(const QStringList& args, int timeout_ms = 300000) {
  return lathe::test::run_process(QString(LATHE_CLI), QStringList{"quantize"} + args, timeout_ms);
}

bool leftovers(const QString& dir) {
  for (const auto& e : fs::directory_iterator(dir.toStdString()))
    if (e.path().filename().string().find(".tmp-") != std::string::npos) return true;
  return false;
}

}  // namespace

class CliQuantizeTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;
  QString model_;
  QString dummy_;  // a folder with a config.json alone
  QString empty_;  // a folder without one
  QString calib_;  // a small plain-text calibration file

 private slots:
  void initTestCase() {
    // No CUDA plugin in the `lathe` processes, whatever the machine has.
    qputenv("LATHE_CUDA_PLUGIN", dir_.filePath("no-such-liblathe_cuda.so").toUtf8());
    dummy_ = dir_.filePath("dummy");
    LATHE_QVERIFY_OK(lathe::test::write_synthetic_config(dummy_.toStdString(), {}));
    empty_ = dir_.filePath("empty");
    fs::create_directories(empty_.toStdString());
    calib_ = dir_.filePath("calib.txt");
    {
      std::string text;
      for (int i = 0; i < 3000; ++i) text += i % 7 ? "the river over stone " : "light 42.\n";
      std::ofstream(calib_.toStdString()) << text;
    }
    model_ = dir_.filePath("synthetic");
    LATHE_QVERIFY_OK(lathe::test::write_synthetic_model(model_.toStdString(), {}));
    lathe::test::SyntheticModel fp8;
    fp8.bad_tensor_dtype = "F8_E4M3";
    LATHE_QVERIFY_OK(lathe::test::write_synthetic_model(dir_.filePath("fp8").toStdString(), fp8));
  }

  void bad_input_is_one_line_and_exit_1_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QString>("expected");
    const QString out = dir_.filePath("out");
    QTest::newRow("unknown scheme")
        << QStringList{model_, "-o", out, "--scheme", "iq2_xs"} << "unknown --scheme 'iq2_xs'";
    QTest::newRow("group size") << QStringList{model_, "-o",           out, "--scheme",
                                               "rtn",  "--group-size", "96"}
                                << "group size 96 does not divide";
    QTest::newRow("output exists")
        << QStringList{model_, "-o", model_ + "/config.json", "--scheme", "q8_0"}
        << "exists; pass --force";
    QTest::newRow("sym and asym") << QStringList{model_, "-o",    out,     "--scheme",
                                                 "rtn",  "--sym", "--asym"}
                                  << "--sym and --asym";
    QTest::newRow("no model") << QStringList{dir_.filePath("missing"), "-o", out, "--scheme",
                                             "q8_0"}
                              << "no such file or folder";
    QTest::newRow("awq 8 bits") << QStringList{model_,   "-o", out,        "--scheme", "rtn",
                                               "--bits", "8",  "--format", "awq"}
                                << "4-bit";
    QTest::newRow("source dtype") << QStringList{dir_.filePath("fp8"), "-o", out, "--scheme",
                                                 "q8_0"}
                                  << "unsupported source: ";
    QTest::newRow("shard size") << QStringList{model_, "-o",           out,   "--scheme",
                                               "rtn",  "--shard-size", "lots"}
                                << "--shard-size";
    QTest::newRow("cuda without a gpu")
        << QStringList{model_,          "-o",   out,        "-s",  "gptq", "--group-size", "64",
                       "--calibration", calib_, "--device", "cuda"}
        << "--device cuda: ";
    QTest::newRow("cuda:1 without a gpu")
        << QStringList{model_,          "-o",   out,        "-s",    "awq",
                       "--calibration", calib_, "--device", "cuda:1"}
        << "; use --device cpu";
    QTest::newRow("bogus device")
        << QStringList{model_, "-o", out, "-s", "rtn", "--device", "bogus"}
        << "--device must be auto, cpu, cuda or cuda:N (N a CUDA device number, 0 for the first), "
           "got 'bogus'";
    QTest::newRow("dummy without config.json")
        << QStringList{empty_, "-o", out, "-s", "fp8-dynamic", "--load-format", "dummy"}
        << "has no config.json";
    QTest::newRow("dummy of a gguf")
        << QStringList{QString::fromStdString(lathe::test::fixture_path("model/tiny_llama.gguf")),
                       "-o",
                       out,
                       "-s",
                       "q8_0",
                       "--load-format",
                       "dummy"}
        << "is a GGUF file";
    QTest::newRow("dummy with --calibration") << QStringList{dummy_,  "-o",
                                                             out,     "-s",
                                                             "gptq",  "--group-size",
                                                             "64",    "--load-format",
                                                             "dummy", "--calibration",
                                                             calib_}
                                              << "--load-format dummy reads no tokenizer";
  }
  void bad_input_is_one_line_and_exit_1() {
    QFETCH(QStringList, args);
    QFETCH(QString, expected);
    const lathe::test::ProcessResult r = lathe_quantize(args);
    QCOMPARE(r.exit_code, 1);
    const QStringList lines = r.err.split('\n', Qt::SkipEmptyParts);
    QCOMPARE(lines.size(), 1);
    QVERIFY2(lines[0].startsWith("lathe quantize: ") && lines[0].contains(expected),
             qPrintable(r.err));
    QVERIFY(!fs::exists(dir_.filePath("out").toStdString()));
    QVERIFY(!leftovers(dir_.path()));
  }

  void reports_progress_and_a_summary() {
    const QString out = dir_.filePath("q.gguf");
    lathe::test::ProcessResult r = lathe_quantize({model_, "-o", out, "-s", "q4_k_m"});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    QVERIFY2(r.err.contains("layer 1/2 done") && r.err.contains("layer 2/2 done") &&
                 r.err.contains("ETA"),
             qPrintable(r.err));
    QVERIFY2(r.err.contains("wrote " + out) && r.err.contains("tensor types: "), qPrintable(r.err));
    QVERIFY(fs::exists(out.toStdString()));
    // Again without --force: refused; with it: replaced.
    r = lathe_quantize({model_, "-o", out, "-s", "q8_0"});
    QCOMPARE(r.exit_code, 1);
    r = lathe_quantize({model_, "-o", out, "-s", "q8_0", "--force"});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    const QString folder = dir_.filePath("rtn");
    r = lathe_quantize({model_, "-o", folder + "/", "-s", "rtn", "--format", "gptq", "--asym",
                        "--group-size", "64"});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    QVERIFY2(r.err.contains("int4 g64 asymmetric; gptq"), qPrintable(r.err));
    QVERIFY(fs::exists(folder.toStdString() + "/quantize_config.json"));
  }

  void quantizes_dummy_weights_and_says_where() {
    const QString out = dir_.filePath("dummy_gptq");
    lathe::test::ProcessResult r =
        lathe_quantize({dummy_, "-o", out, "-s", "gptq", "--group-size", "64", "--desc-act",
                        "--num-samples", "8", "--seq-len", "32", "--load-format", "dummy"});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    for (const char* needle :
         {"weights: random (--load-format dummy)", "no tokenizer files copied", "device: cpu (",
          "(--device auto: no usable GPU: ",
          // The missing plugin file, or no CUDA backend in a LATHE_CUDA=OFF build (`debug`).
          lathe::cuda_backend::built() ? "no-such-liblathe_cuda.so" : "built with LATHE_CUDA=OFF",
          "calibration: 8 samples, 256 tokens of random token ids", "layer 2/2 done", ", on cpu (",
          "lathe quantize: peak memory: host RSS "})
      QVERIFY2(r.err.contains(needle), qPrintable(needle + QString("\n") + r.err));
    QVERIFY2(!r.err.contains(", device "), qPrintable(r.err));  // no GPU memory on the CPU
    QVERIFY(fs::exists(out.toStdString() + "/model.safetensors"));
    QVERIFY(!fs::exists(out.toStdString() + "/tokenizer.json"));
    // --device cpu says no more than where; a scheme that is not calibrated ignores --device.
    r = lathe_quantize({dummy_, "-o", dir_.filePath("dummy_awq"), "-s", "awq", "--num-samples", "8",
                        "--seq-len", "32", "--load-format", "dummy", "--device", "cpu"});
    QVERIFY2(
        r.exit_code == 0 && r.err.contains("device: cpu (") && !r.err.contains("--device auto"),
        qPrintable(r.err));
    r = lathe_quantize({dummy_, "-o", dir_.filePath("dummy_fp8"), "-s", "fp8-dynamic",
                        "--load-format", "dummy", "--device", "cuda"});
    QVERIFY2(r.exit_code == 0 && r.err.contains("--device cuda applies to gptq and awq only"),
             qPrintable(r.err));
  }

  // --profile: after each block, where the time went (every op kind and stage named, counts that
  // grow); a scheme that is not calibrated prints no profile.
  void profile_prints_where_the_time_went() {
    lathe::test::ProcessResult r =
        lathe_quantize({dummy_, "-o", dir_.filePath("dummy_profile"), "-s", "gptq", "--group-size",
                        "64", "--num-samples", "8", "--seq-len", "32", "--load-format", "dummy",
                        "--device", "cpu", "--no-resume", "--profile"});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    QCOMPARE(r.err.count("time so far: ops "), 2);  // two blocks
    for (const char* needle :
         {"linear ", "mlp ", "attention ", "hessian ", "gptq ", "awq ", "norms/RoPE/adds/copies ",
          "blocks ", "held-out checks ", "writer ", "checkpoints "})
      QVERIFY2(r.err.contains(needle), qPrintable(needle + QString("\n") + r.err));
    // Block 1's line counts 7 GPTQ runs, block 2's 14.
    QVERIFY2(r.err.contains("/ 7, awq "), qPrintable(r.err));
    QVERIFY2(r.err.contains("/ 14, awq "), qPrintable(r.err));
    r = lathe_quantize({dummy_, "-o", dir_.filePath("dummy_profile_rtn"), "-s", "rtn",
                        "--load-format", "dummy", "--profile"});
    QVERIFY2(r.exit_code == 0 && !r.err.contains("time so far"), qPrintable(r.err));
  }

  void no_resume_leaves_no_work_folder() {
    const QString out = dir_.filePath("dummy_no_resume");
    qputenv("LATHE_QUANTIZE_STOP_AFTER_LAYERS", "1");
    lathe::test::ProcessResult r = lathe_quantize(
        {dummy_, "-o", out, "-s", "gptq", "--group-size", "64", "--num-samples", "8", "--seq-len",
         "32", "--load-format", "dummy", "--device", "cpu", "--no-resume"});
    qunsetenv("LATHE_QUANTIZE_STOP_AFTER_LAYERS");
    QVERIFY2(r.exit_code == 130 && r.err.contains("interrupted; nothing was written") &&
                 !r.err.contains(".partial"),
             qPrintable(r.err));
    QVERIFY(!fs::exists(out.toStdString()));
    QVERIFY(!fs::exists(out.toStdString() + ".partial"));
  }

  void gptq_resumes_from_its_work_folder() {
    const QString calib = calib_;
    const QStringList common = {
        "-s",  "gptq",          "--group-size", "64",        "--calibration",
        calib, "--num-samples", "16",           "--seq-len", "32"};
    const QString ref = dir_.filePath("gptq_ref"), out = dir_.filePath("gptq_resumed");
    lathe::test::ProcessResult r = lathe_quantize(QStringList{model_, "-o", ref} + common);
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    QVERIFY2(r.err.contains("held-out error") && r.err.contains("held-out check: on 1 held-out"),
             qPrintable(r.err));
    qputenv("LATHE_QUANTIZE_STOP_AFTER_LAYERS", "1");
    r = lathe_quantize(QStringList{model_, "-o", out} + common);
    qunsetenv("LATHE_QUANTIZE_STOP_AFTER_LAYERS");
    QVERIFY2(r.exit_code == 130 && r.err.contains("blocks 0-0 are saved in " + out + ".partial"),
             qPrintable(r.err));
    QVERIFY(!fs::exists(out.toStdString()));
    // Another job is refused before any work, naming what differs.
    r = lathe_quantize(QStringList{model_, "-o", out} + common + QStringList{"--desc-act"});
    QVERIFY2(r.exit_code == 1 && r.err.contains("another job (scheme differ)") &&
                 r.err.contains("--restart"),
             qPrintable(r.err));
    r = lathe_quantize(QStringList{model_, "-o", out} + common);
    QVERIFY2(r.exit_code == 0 && r.err.contains("resuming: " + out + ".partial holds blocks 0-0") &&
                 r.err.contains("read back from the work folder"),
             qPrintable(r.err));
    QVERIFY(!fs::exists(out.toStdString() + ".partial"));
    for (const auto& e : fs::directory_iterator(ref.toStdString())) {
      const std::string other = out.toStdString() + "/" + e.path().filename().string();
      QVERIFY2(lathe::read_file(e.path().string()).value() == lathe::read_file(other).value(),
               other.c_str());
    }
  }

  void ctrl_c_stops_cleanly() {
    const std::string model = lathe::test::default_model_path();
    if (!fs::exists(model))
      QSKIP("the default model is not in the cache (scripts/fetch-default-model.sh)");
    const QString out = dir_.filePath("interrupted.gguf");
    QProcess p;
    p.start(QString(LATHE_CLI),
            {"quantize", QString::fromStdString(model), "-o", out, "-s", "q4_k_m"});
    QVERIFY(p.waitForStarted());
    // Interrupt once the first layer is done, well before the last one.
    QString err;
    QElapsedTimer t;
    t.start();
    while (!err.contains("layer 1/") && t.elapsed() < 120000 && p.state() == QProcess::Running) {
      p.waitForReadyRead(100);
      err += QString::fromUtf8(p.readAllStandardError());
    }
    QVERIFY2(err.contains("layer 1/"), qPrintable(err));
    ::kill(static_cast<pid_t>(p.processId()), SIGINT);
    QVERIFY(p.waitForFinished(120000));
    err += QString::fromUtf8(p.readAllStandardError());
    QCOMPARE(p.exitStatus(), QProcess::NormalExit);
    QVERIFY2(p.exitCode() == 130 && err.contains("interrupted; nothing was written"),
             qPrintable(err));
    QVERIFY(!fs::exists(out.toStdString()));
    QVERIFY(!leftovers(dir_.path()));
  }
};

QTEST_GUILESS_MAIN(CliQuantizeTest)
#include "cli_quantize_test.moc"
