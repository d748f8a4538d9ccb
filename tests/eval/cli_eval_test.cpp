// `lathe eval` and the calibrated `lathe quantize` schemes as a user runs them: the JSON report of
// a model against itself, the table, one-line errors with exit code 1, and a GPTQ folder made from
// a calibration file that `lathe eval` then measures against its source.
#include <QtTest>

#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>

#include <fstream>

#include "quant/quant_model_util.h"
#include "test_support.h"

namespace {

const char* kText =
    "The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor jugs. "
    "How vexingly quick daft zebras jump! Sphinx of black quartz, judge my vow. The five "
    "boxing wizards jump quickly. Jackdaws love my big sphinx of quartz.\n";

lathe::test::ProcessResult run_lathe(const QStringList& args) {
  return lathe::test::run_process(QString(LATHE_CLI), args, 300000);
}

QString write(const QTemporaryDir& dir, const QString& name, const std::string& text) {
  const QString path = dir.filePath(name);
  std::ofstream(path.toStdString(), std::ios::binary) << text;
  return path;
}

}  // namespace

class CliEvalTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;

 private slots:
  void json_report_of_a_model_against_itself() {
    const QString model = QString::fromStdString(lathe::test::fixture_path("model/tiny_llama"));
    const QString text = write(dir_, "text.txt", kText);
    auto r = run_lathe({"eval", model, "--reference", model, "--text", text, "--ctx", "16",
                        "--json", "--device", "cpu", "--threads", "2"});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    const QJsonObject j = QJsonDocument::fromJson(r.out.toUtf8()).object();
    QCOMPARE(j["ctx"].toInt(), 16);
    QCOMPARE(j["stride"].toInt(), 8);
    QVERIFY(j["windows"].toInt() >= 2);
    QCOMPARE(j["kld"].toObject()["mean"].toDouble(), 0.0);
    QCOMPARE(j["top1_agreement"].toDouble(), 1.0);
    QCOMPARE(j["ppl_ratio"].toDouble(), 1.0);
    QVERIFY(r.err.contains("window 1/"));
    r = run_lathe({"eval", model, "--text", text, "--ctx", "16", "--device", "cpu"});
    QVERIFY2(r.exit_code == 0 && r.out.contains("perplexity") && !r.out.contains("KLD"),
             qPrintable(r.out + r.err));
  }

  void score_from_scores_the_second_halves() {
    // llama-perplexity's plan at n_ctx 16: chunks of 16, targets 9..15 of each.
    const QString model = QString::fromStdString(lathe::test::fixture_path("model/tiny_llama"));
    const QString text = write(dir_, "text2.txt", kText);
    auto r = run_lathe({"eval", model, "--text", text, "--ctx", "16", "--stride", "16",
                        "--score-from", "9", "--max-windows", "2", "--json", "--device", "cpu"});
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    const QJsonObject j = QJsonDocument::fromJson(r.out.toUtf8()).object();
    QCOMPARE(j["score_from"].toInt(), 9);
    QCOMPARE(j["windows"].toInt(), 2);
    QCOMPARE(j["scored_positions"].toInt(), 14);
    r = run_lathe(
        {"eval", model, "--text", text, "--ctx", "16", "--score-from", "9", "--device", "cpu"});
    QVERIFY2(r.exit_code == 0 && r.out.contains("targets from offset 9"), qPrintable(r.out));
  }

  void bad_input_is_one_line_and_exit_1() {
    const QString model = QString::fromStdString(lathe::test::fixture_path("model/tiny_llama"));
    const QString empty = write(dir_, "empty.txt", "");
    const QString text = write(dir_, "short.txt", "Hi.");
    for (const auto& [args, needle] :
         {std::pair{QStringList{"eval", model, "--text", empty}, QString("is empty")},
          std::pair{QStringList{"eval", model, "--text", text}, QString("fewer than one window")},
          std::pair{QStringList{"eval", model, "--text", text, "--device", "tpu"},
                    QString("--device must be")},
          std::pair{QStringList{"eval", model, "--text", text, "--ctx", "16", "--score-from", "16"},
                    QString("--score-from must be in [0, --ctx - 1 = 15]")}}) {
      auto r = run_lathe(args);
      QCOMPARE(r.exit_code, 1);
      QVERIFY2(r.err.contains(needle) && r.err.trimmed().count('\n') == 0, qPrintable(r.err));
    }
  }

  void gptq_from_a_calibration_file_then_eval() {
    const std::string model = dir_.filePath("synthetic").toStdString();
    LATHE_QVERIFY_OK(lathe::test::write_synthetic_model(model, {}));
    std::string calib;
    for (int i = 0; i < 40; ++i) calib += kText;
    const QString file = write(dir_, "calib.txt", calib);
    const QString out = dir_.filePath("gptq");
    auto q =
        run_lathe({"quantize", QString::fromStdString(model), "-s", "gptq", "--group-size", "64",
                   "--calibration", file, "--num-samples", "4", "--seq-len", "32", "-o", out});
    QVERIFY2(q.exit_code == 0, qPrintable(q.err));
    QVERIFY2(
        q.err.contains("calibration: 4 samples, 128 tokens") && q.err.contains("layer 2/2 done"),
        qPrintable(q.err));
    auto e = run_lathe({"eval", out, "--reference", QString::fromStdString(model), "--text", file,
                        "--ctx", "32", "--max-windows", "2", "--json", "--device", "cpu"});
    QVERIFY2(e.exit_code == 0, qPrintable(e.err));
    const QJsonObject j = QJsonDocument::fromJson(e.out.toUtf8()).object();
    QCOMPARE(j["windows"].toInt(), 2);
    QVERIFY(j["kld"].toObject()["mean"].toDouble() > 0.0);
    QVERIFY(j["top1_agreement"].toDouble() > 0.5);
  }
};

QTEST_GUILESS_MAIN(CliEvalTest)
#include "cli_eval_test.moc"
