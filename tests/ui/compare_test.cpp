// The Compare tab with the real engine (CPU): the default model against its Q8_0 made by the
// quantization library, a tiny sweep (concurrency 1 and 2, 16 prompt and 8 output tokens). The
// table has both variants, the chart one series per variant with one point per level, the exports
// hold every number, the finished run is saved and reopens identical, Stop ends a run within
// seconds, bad choices are refused with a reason, and the window never stalls.
// Without the engine (a made-up run shown as if opened): the PNG and Markdown exports, the saved
// run's round trip, and the reason given for each kind of bad saved file.
#include <QtTest>

#include <qcustomplot.h>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QStandardPaths>

#include <cmath>

#include "engine/quant/quantize_model.h"
#include "test_support.h"
#include "ui/bridge/compare_task.h"
#include "ui/bridge/quality_eval.h"
#include "ui/common/message_banner.h"
#include "ui/compare/compare_export.h"
#include "ui/compare/compare_panel.h"
#include "ui/compare/compare_report.h"
#include "ui/compare/compare_results.h"
#include "ui/compare/compare_run.h"
#include "ui/compare/compare_run_store.h"
#include "ui/models/model_card.h"
#include "ui_test_support.h"

using namespace lathe::ui;
using lathe::test::scaled_ms;

namespace {

// Three variants as a run would give them: the reference, one with quality measured, one that
// failed to load. Names carry Markdown's special characters.
CompareRun sampleRun() {
  CompareRun run;
  run.spec.models = {"/m/smol_q4.gguf", "/m/smol q8|b.gguf", "/m/broken.gguf"};
  run.spec.concurrency = {1, 4, 16};
  run.spec.inputLen = 96;
  run.spec.outputLen = 48;
  run.spec.maxModelLen = 160;
  run.spec.evalText = "/t/held-out.txt";
  CompareVariant a;
  a.path = run.spec.models[0];
  a.name = "smol_q4.gguf";
  a.device = "NVIDIA H200 (139.8 GiB)";
  a.dtype = "q4_1";
  a.weightBytes = 98'765'432;
  a.bitsPerWeight = 5.8437;
  a.kvCacheBytes = 12'582'912;
  a.batch1TokensPerSec = 312.26;
  a.batch1LatencyMs = 201.7;
  a.prefillTokensPerSec = 9100.75;
  a.ttftMs = 10.546875;
  a.sweep = {ComparePoint{1, 4, 0, 300.5, 4.25, 10.5, 12.75, 3.125, 3.5},
             ComparePoint{4, 8, 0, 1000.25, 14.5, 12.5, 20.0, 3.5, 5.25},
             ComparePoint{16, 32, 0, 2500.0, 40.126, 30.5, 61.0, 6.0, 9.75}};
  a.quality.referencePerplexity = 11.25;
  CompareVariant b = a;
  b.path = run.spec.models[1];
  b.name = "smol q8|b.gguf";
  b.dtype = "q8_0";
  b.weightBytes = 144'000'000;
  b.bitsPerWeight = 8.5;
  b.batch1TokensPerSec = 250.125;
  b.sweep[0].outputTokensPerSec = 240.4;
  b.sweep[1].outputTokensPerSec = 800.2;
  b.sweep[2].outputTokensPerSec = 2000.0;
  b.quality = QualityReport{true,  "/t/held-out.txt", {},     510,      2,  256, 11.3127,
                            11.25, 0.001953125,       0.0125, 0.984375, 3.5};
  CompareVariant c;
  c.path = run.spec.models[2];
  c.name = "broken.gguf";
  c.error = "cannot load: bad magic";
  c.quality.error = "not measured: the model did not load";
  run.variants = {a, b, c};
  run.verdict = compareVerdict(run.variants);
  run.finished = QDateTime(QDate(2025, 5, 1), QTime(12, 34, 56, 789), Qt::UTC);
  return run;
}

// Starts an export and waits for its files; the error, empty when it worked.
QString exportAndWait(ComparePanel* panel, const QString& path) {
  QSignalSpy done(panel, &ComparePanel::exportFinished);
  QString error;
  if (!panel->exportTo(path, &error)) return error;
  if (!done.wait(scaled_ms(30000))) return "no exportFinished";
  return done.first().at(1).toString();
}

// Opens a saved run and waits for the answer.
bool openAndWait(ComparePanel* panel, const QString& path) {
  QSignalSpy opened(panel, &ComparePanel::runOpened);
  panel->openRun(path);
  return opened.wait(scaled_ms(30000)) && opened.first().at(1).toBool();
}

// Distinct colors in an image (a blank image has one).
int colorCount(const QImage& image) {
  QSet<QRgb> colors;
  for (int y = 0; y < image.height(); y += 2)
    for (int x = 0; x < image.width(); x += 2) colors.insert(image.pixel(x, y));
  return static_cast<int>(colors.size());
}

}  // namespace

class CompareTest : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;
  QString m_model;
  QString m_q8;
  std::unique_ptr<ComparePanel> m_panel;

  void requireModels() {
    if (m_q8.isEmpty()) QSKIP("default model missing: run scripts/fetch-default-model.sh");
  }

 private slots:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    test::isolateSettings(m_dir);
    // Test mode's data folder outlives the run: start without saved runs.
    QVERIFY(QDir(defaultCompareRunsFolder()).removeRecursively());
    m_panel = std::make_unique<ComparePanel>([] { return LoadSettings{}; });
    m_panel->resize(1100, 800);
    m_panel->show();
    m_model = QString::fromStdString(lathe::test::default_model_path());
    if (!QFile::exists(m_model)) return;  // the engine tests skip themselves
    const QString q8 = m_dir.filePath("smol-q8_0.gguf");
    lathe::QuantizeRequest r;
    r.model = m_model.toStdString();
    r.output = q8.toStdString();
    r.scheme.scheme = "q8_0";
    auto job = lathe::QuantizeJob::prepare(r);
    QVERIFY2(job.is_ok(), job.status().message().c_str());
    auto done = job.value()->run(nullptr, nullptr);
    QVERIFY2(done.is_ok(), done.status().message().c_str());
    m_q8 = q8;
  }

  void cleanupTestCase() { m_panel.reset(); }

  void bad_choices_are_refused() {
    requireModels();
    m_panel->setModels({m_model});
    QVERIFY(!m_panel->run());
    QVERIFY(m_panel->banner()->text().contains("at least two"));
    m_panel->setModels({m_model, m_q8});
    m_panel->setConcurrency("1, four");
    QVERIFY(!m_panel->run());
    QVERIFY2(m_panel->banner()->text().contains("\"four\""), qPrintable(m_panel->banner()->text()));
    QVERIFY(!m_panel->isRunning());
  }

  void two_variants_give_one_series_each() {
    requireModels();
    m_panel->setModels({m_model, m_q8});
    m_panel->setConcurrency("1, 2");
    m_panel->setLengths(16, 8);
    QSignalSpy finished(m_panel.get(), &ComparePanel::comparisonFinished);
    QSignalSpy saved(m_panel.get(), &ComparePanel::runSaved);
    test::ResponsivenessProbe probe;
    probe.start();
    QVERIFY(m_panel->run());
    QVERIFY(finished.wait(scaled_ms(240000)));
    QVERIFY(saved.count() == 1 || saved.wait(scaled_ms(30000)));
    probe.stop();
    QCOMPARE(finished.first().first().toBool(), false);
    QVERIFY2(probe.maxGapMs() < scaled_ms(100),
             qPrintable(QString("the event loop stalled for %1 ms").arg(probe.maxGapMs())));
    const QVector<CompareVariant>& vs = m_panel->results()->variants();
    QCOMPARE(vs.size(), 2);
    for (const CompareVariant& v : vs) {
      QVERIFY2(v.error.isEmpty(), qPrintable(v.error));
      QVERIFY(v.batch1TokensPerSec > 0);
      QVERIFY(v.prefillTokensPerSec > 0);
      QVERIFY(v.weightBytes > 0);
      QCOMPARE(v.sweep.size(), 2);
      for (const ComparePoint& p : v.sweep) {
        QCOMPARE(p.failed, 0);
        QCOMPARE(p.completed, promptsForLevel(m_panel->lastSpec(), p.concurrency));
        QVERIFY(p.outputTokensPerSec > 0);
        QVERIFY(p.ttftP99Ms >= p.ttftP50Ms);
      }
    }
    QCOMPARE(vs[0].dtype, QString("q4_1"));
    QCOMPARE(vs[1].dtype, QString("q8_0"));
    // Quality against the first model on the held-out text (fetched by scripts/fetch-eval-text.sh),
    // equal to what `lathe eval` computes: Q8_0 of a Q4_1 file stays close to it.
    if (!m_panel->lastSpec().evalText.isEmpty()) {
      QVERIFY2(vs[1].quality.measured, qPrintable(vs[1].quality.error));
      QVERIFY(!vs[0].quality.measured);
      QVERIFY(vs[1].quality.kldMean >= 0.0 && vs[1].quality.kldMean < 0.05);
      QVERIFY(vs[1].quality.top1Agreement > 0.8);
      const QualityReport direct = measureQuality(
          {m_q8, m_model, m_panel->lastSpec().evalText, m_panel->lastSpec().evalContext,
           m_panel->lastSpec().evalWindows},
          [](const lathe::EvalProgress&) {}, nullptr);
      QCOMPARE(direct.kldMean, vs[1].quality.kldMean);
      QCOMPARE(direct.top1Agreement, vs[1].quality.top1Agreement);
      QVERIFY(m_panel->results()
                  ->data(m_panel->results()->index(1, CompareResultsModel::kQuality))
                  .toString()
                  .startsWith("KLD "));
    }
    QVERIFY(vs[1].weightBytes > vs[0].weightBytes);
    // One series per variant, one point per level, for every metric.
    for (auto metric : {ComparePanel::kOutputThroughput, ComparePanel::kItlP99}) {
      m_panel->setMetric(metric);
      QCOMPARE(m_panel->plot()->graphCount(), 2);
      for (int g = 0; g < 2; ++g) QCOMPARE(m_panel->plot()->graph(g)->data()->size(), 2);
    }
    QCOMPARE(m_panel->plot()->graph(1)->name(), QString("smol-q8_0.gguf"));
    QVERIFY(m_panel->verdict().contains("smol-q8_0.gguf"));
    // Exports: CSV has a header and one line per variant × level; JSON has every number.
    for (const CompareVariant& v : vs) QVERIFY(v.device.startsWith("CPU"));
    QCOMPARE(m_panel->results()->data(m_panel->results()->index(1, CompareResultsModel::kDevice)),
             QVariant(vs[1].device));  // the table says where each variant was measured
    // The finished run was saved under the app's data folder and reopens identical, in a new tab
    // as well.
    const QString savedPath = saved.first().first().toString();
    QCOMPARE(QFileInfo(savedPath).absolutePath(),
             QStandardPaths::writableLocation(QStandardPaths::AppDataLocation) + "/compare-runs");
    const CompareRun shown = m_panel->currentRun();
    QCOMPARE(shown.verdict, m_panel->verdict());
    ComparePanel other([] { return LoadSettings{}; });
    QTRY_COMPARE_WITH_TIMEOUT(other.recentRuns().size(), 1, scaled_ms(20000));  // a loaded machine
    QCOMPARE(other.recentRuns().first().first, savedPath);
    QVERIFY(other.recentRuns().first().second.contains("smol-q8_0.gguf"));
    QVERIFY(openAndWait(&other, savedPath));
    QVERIFY(other.currentRun() == shown);
    QCOMPARE(other.models(), QStringList({m_model, m_q8}));
    QCOMPARE(other.plot()->graphCount(), 2);
    QCOMPARE(other.verdict(), m_panel->verdict());
    const QString csv = m_dir.filePath("cmp.csv");
    QCOMPARE(exportAndWait(m_panel.get(), csv), QString());
    QFile f(csv);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QList<QByteArray> lines = f.readAll().trimmed().split('\n');
    QCOMPARE(lines.size(), 1 + 2 * 2);
    QVERIFY(lines[0].startsWith("model,path,storage"));
    const QString json = m_dir.filePath("cmp.json");
    QCOMPARE(exportAndWait(m_panel.get(), json), QString());
    QFile j(json);
    QVERIFY(j.open(QIODevice::ReadOnly));
    const QJsonObject doc = QJsonDocument::fromJson(j.readAll()).object();
    QCOMPARE(doc["variants"].toArray().size(), 2);
    QCOMPARE(doc["variants"]
                 .toArray()[1]
                 .toObject()["sweep"]
                 .toArray()[1]
                 .toObject()["output_tokens_per_s"]
                 .toDouble(),
             vs[1].sweep[1].outputTokensPerSec);
  }

  void stop_ends_a_run_within_seconds() {
    requireModels();
    m_panel->setModels({m_model, m_q8});
    m_panel->setConcurrency("1, 2, 4, 8");
    m_panel->setLengths(16, 32);
    QSignalSpy finished(m_panel.get(), &ComparePanel::comparisonFinished);
    QSignalSpy saved(m_panel.get(), &ComparePanel::runSaved);
    const auto savedRuns = [this] {
      return QDir(m_panel->runsFolder()).entryList({"*.json"}, QDir::Files).size();
    };
    const qsizetype before = savedRuns();
    // Stop as soon as the sweep of the first model starts.
    QElapsedTimer sinceStop;
    auto conn = connect(m_panel->task(), &CompareTask::progress, this,
                        [this, &sinceStop](const CompareProgressInfo& p) {
                          if (!p.stage.contains("concurrency") || sinceStop.isValid()) return;
                          sinceStop.start();
                          m_panel->stop();
                        });
    QVERIFY(m_panel->run());
    QVERIFY(finished.wait(scaled_ms(120000)));
    disconnect(conn);
    QVERIFY(sinceStop.isValid());
    QVERIFY2(sinceStop.elapsed() < scaled_ms(5000),  // 5 s; longer under the sanitizers
             qPrintable(QString("stopped after %1 ms").arg(sinceStop.elapsed())));
    QCOMPARE(finished.first().first().toBool(), true);
    QVERIFY(m_panel->results()->variants().isEmpty());
    // A stopped run is not saved.
    QVERIFY(!saved.wait(500));
    QCOMPARE(savedRuns(), before);
  }

  // --- Without the engine -----------------------------------------------------------------------

  void saved_run_round_trips_exactly() {
    const CompareRun run = sampleRun();
    CompareRun back;
    QString error;
    QVERIFY2(compareFromJson(compareToJson(run), &back, &error), qPrintable(error));
    QVERIFY(back == run);
    QCOMPARE(compareToJson(back), compareToJson(run));
    // Through the store and the panel: table, chart and verdict as they were.
    const QString folder = m_dir.filePath("runs");
    const QString path = saveCompareRun(folder, run, &error);
    QVERIFY2(!path.isEmpty(), qPrintable(error));
    QCOMPARE(QFileInfo(path).fileName(), QString("20250501-123456-789.json"));
    QCOMPARE(QFileInfo(saveCompareRun(folder, run, &error)).fileName(),
             QString("20250501-123456-789-2.json"));
    ComparePanel panel([] { return LoadSettings{}; }, nullptr, folder);
    panel.resize(1000, 700);
    panel.show();
    QTRY_COMPARE(panel.recentRuns().size(), 2);
    test::ResponsivenessProbe probe;
    probe.start();
    QTest::qWait(50);  // the probe has ticked: opening's own time counts as a gap
    QVERIFY(openAndWait(&panel, path));
    probe.stop();
    QVERIFY2(probe.maxGapMs() < scaled_ms(100),
             qPrintable(QString("stalled %1 ms").arg(probe.maxGapMs())));
    QVERIFY(panel.currentRun() == run);
    QCOMPARE(panel.results()->rowCount(), 3);
    QCOMPARE(
        panel.results()->data(panel.results()->index(1, CompareResultsModel::kQuality)).toString(),
        QString("KLD 0.0020, top-1 98.4%"));
    QCOMPARE(panel.verdict(), run.verdict);
    QCOMPARE(panel.models(), run.spec.models);
    QCOMPARE(panel.plot()->graphCount(), 3);
    QCOMPARE(panel.plot()->graph(1)->data()->size(), 3);
    QCOMPARE(panel.plot()->graph(1)->data()->at(2)->value, 2000.0);
    QCOMPARE(panel.plot()->legend->itemCount(), 2);  // the variant that failed has no points
    // A value that is not finite is written as null and read as NaN.
    CompareRun odd = run;
    odd.variants[0].sweep[0].itlP99Ms = std::nan("");
    QVERIFY(compareToJson(odd).contains("\"itl_p99_ms\": null"));
    QVERIFY(compareFromJson(compareToJson(odd), &back, &error));
    QVERIFY(std::isnan(back.variants[0].sweep[0].itlP99Ms));
  }

  void bad_saved_files_say_why_data() {
    QTest::addColumn<QByteArray>("bytes");
    QTest::addColumn<QString>("reason");
    QByteArray good = compareToJson(sampleRun());
    auto without = [&](const QString& path) {
      // Removes the field at "variants/1/sweep/2/ttft_p50_ms"-style paths.
      QJsonObject root = QJsonDocument::fromJson(good).object();
      const QStringList keys = path.split('/');
      std::function<QJsonValue(QJsonValue, int)> drop = [&](QJsonValue v, int i) -> QJsonValue {
        if (v.isArray()) {
          QJsonArray a = v.toArray();
          a[keys[i].toInt()] = drop(a[keys[i].toInt()], i + 1);
          return a;
        }
        QJsonObject o = v.toObject();
        if (i == keys.size() - 1)
          o.remove(keys[i]);
        else
          o[keys[i]] = drop(o[keys[i]], i + 1);
        return o;
      };
      return QJsonDocument(drop(root, 0).toObject()).toJson();
    };
    QTest::newRow("not JSON") << QByteArray("{\"format\": \"lathe-compare\", ") << "not JSON";
    QTest::newRow("empty file") << QByteArray() << "not JSON";
    QTest::newRow("CSV") << compareToCsv(sampleRun().variants) << "not JSON";
    QTest::newRow("a list") << QByteArray("[1, 2]") << "not a Lathe comparison";
    QTest::newRow("a conversation")
        << QByteArray("{\"id\": \"x\", \"messages\": []}") << "not a Lathe comparison";
    QTest::newRow("newer version") << QByteArray(good).replace("\"version\": 1", "\"version\": 7")
                                   << "saved by a newer Lathe (comparison format version 7";
    QTest::newRow("no version") << without("version")
                                << "\"version\" is missing or not a whole number";
    QTest::newRow("text version") << QByteArray(good).replace("\"version\": 1",
                                                              "\"version\": \"1\"")
                                  << "\"version\" is missing or not a whole number";
    QTest::newRow("no spec") << without("spec") << "\"spec\" is missing";
    QTest::newRow("no levels") << without("spec/concurrency") << "spec: \"concurrency\" is missing";
    QTest::newRow("no sweep field") << without("variants/1/sweep/2/ttft_p50_ms")
                                    << "variants[1].sweep[2]: \"ttft_p50_ms\" is missing";
    QTest::newRow("no quality field")
        << without("variants/0/quality/kld_mean") << "variants[0].quality: \"kld_mean\" is missing";
    QTest::newRow("no verdict") << without("verdict") << "\"verdict\" is missing";
    QTest::newRow("wrong type") << QByteArray(good).replace("\"storage\": \"q8_0\"",
                                                            "\"storage\": 8")
                                << "variants[1]: \"storage\" must be text, not a number";
    QTest::newRow("fractional count")
        << QByteArray(good).replace("\"completed\": 32", "\"completed\": 32.5")
        << "variants[0].sweep[2]: \"completed\" must be a whole number";
    QJsonObject noVariants = QJsonDocument::fromJson(good).object();
    noVariants["variants"] = QJsonArray();
    QTest::newRow("no variants") << QJsonDocument(noVariants).toJson() << "variants: empty";
  }

  void bad_saved_files_say_why() {
    QFETCH(QByteArray, bytes);
    QFETCH(QString, reason);
    CompareRun out;
    QString error;
    QVERIFY(!compareFromJson(bytes, &out, &error));
    QVERIFY2(error.contains(reason), qPrintable(error));
    // Through Open run: the banner names the file and says the same; what was shown stays.
    const QString path = m_dir.filePath("bad.json");
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
    f.write(bytes);
    f.close();
    ComparePanel panel([] { return LoadSettings{}; }, nullptr, m_dir.filePath("runs-bad"));
    panel.showRun(sampleRun());
    QVERIFY(!openAndWait(&panel, path));
    QCOMPARE(panel.banner()->kind(), MessageBanner::Kind::kError);
    QVERIFY2(panel.banner()->text().contains("bad.json: " + reason),
             qPrintable(panel.banner()->text()));
    QVERIFY(panel.currentRun() == sampleRun());
  }

  void missing_saved_file_says_so() {
    ComparePanel panel([] { return LoadSettings{}; }, nullptr, m_dir.filePath("runs-bad"));
    QVERIFY(!openAndWait(&panel, m_dir.filePath("gone.json")));
    QVERIFY2(panel.banner()->text().contains("gone.json: cannot open it"),
             qPrintable(panel.banner()->text()));
  }

  void png_export_is_the_chart_on_screen() {
    ComparePanel panel([] { return LoadSettings{}; }, nullptr, m_dir.filePath("runs-png"));
    panel.resize(1000, 700);
    panel.show();
    QVERIFY(QTest::qWaitForWindowExposed(&panel));
    panel.showRun(sampleRun());
    panel.setMetric(ComparePanel::kItlP99);
    const QString png = m_dir.filePath("chart.png");
    QCOMPARE(exportAndWait(&panel, png), QString());
    QImage image;
    QVERIFY(image.load(png, "PNG"));
    QCOMPARE(image.size(), panel.plot()->size());
    QVERIFY2(colorCount(image) > 20, "the chart is blank");
    // The first series' color is drawn.
    bool blue = false;
    for (int y = 0; y < image.height() && !blue; ++y)
      for (int x = 0; x < image.width() && !blue; ++x)
        blue = image.pixelColor(x, y) == QColor(0x25, 0x63, 0xeb);
    QVERIFY(blue);
    // What is on screen stays as it was.
    QCOMPARE(panel.plot()->yAxis->label(), QString("ITL p99 (ms)"));
    QCOMPARE(panel.plot()->graphCount(), 3);
    // Unknown extensions and an unwritable place are refused with a reason.
    QString error;
    QVERIFY(!panel.exportTo(m_dir.filePath("chart.gif"), &error));
    QVERIFY2(error.contains(".md (a report"), qPrintable(error));
    QVERIFY(exportAndWait(&panel, "/proc/no/such/dir/c.png").contains("Cannot write /proc/no"));
    QVERIFY(panel.banner()->text().contains("Cannot write /proc/no"));
  }

  void markdown_report_has_the_tables_the_verdict_and_every_chart() {
    ComparePanel panel([] { return LoadSettings{}; }, nullptr, m_dir.filePath("runs-md"));
    panel.resize(1000, 700);
    panel.show();
    QVERIFY(QTest::qWaitForWindowExposed(&panel));
    const CompareRun run = sampleRun();
    panel.showRun(run);
    QDir dir(m_dir.filePath("report"));
    QVERIFY(dir.mkpath("."));
    test::ResponsivenessProbe probe;
    probe.start();
    QTest::qWait(50);  // the probe has ticked: the export's own time counts as a gap
    QCOMPARE(exportAndWait(&panel, dir.filePath("cmp.md")), QString());
    probe.stop();
    QVERIFY2(probe.maxGapMs() < scaled_ms(100),
             qPrintable(QString("stalled %1 ms").arg(probe.maxGapMs())));
    QFile f(dir.filePath("cmp.md"));
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QString md = QString::fromUtf8(f.readAll());
    QCOMPARE(md, compareToMarkdown(run, compareReportCharts(dir.filePath("cmp.md"))));
    QVERIFY(md.startsWith("# Comparison: smol\\_q4.gguf vs smol q8\\|b.gguf vs broken.gguf\n"));
    QVERIFY(md.contains("- **Date:** 2025-05-01 12:34 UTC\n"));
    QVERIFY(md.contains("- **Device:** NVIDIA H200 (139.8 GiB)\n"));
    QVERIFY(md.contains("- **Concurrency levels:** 1, 4, 16 (requests sent per level: 4, 8, 32)"));
    QVERIFY(md.contains("prompt 96 tokens"));
    QVERIFY(md.contains("output 48 tokens"));
    QVERIFY(md.contains("  2. smol q8\\|b.gguf — /m/smol q8\\|b.gguf\n"));
    // Results: memory, bits/weight, speed, then quality (KLD, p99, top-1, perplexities).
    QVERIFY2(md.contains("| smol\\_q4.gguf | q4\\_1 | " + formatBytes(98'765'432) + " | 5.84 | " +
                         formatBytes(12'582'912) + " | 312.3 | 202 | 9101 | 10.5 | reference |"),
             qPrintable(md));
    QVERIFY(md.contains("| 250.1 |"));
    QVERIFY(md.contains("| 0.0020 | 0.0125 | 98.4% | 11.313 (first: 11.250) |"));
    QVERIFY(
        md.contains("- broken.gguf: cannot load: bad magic\n"
                    "- broken.gguf, quality: not measured: the model did not load\n"));
    // The sweep: every variant × level.
    QVERIFY(md.contains(
        "| smol\\_q4.gguf | 16 | 32 | 0 | 2500.0 | 40.13 | 30.5 | 61.0 | 6.00 | 9.75 |"));
    QVERIFY(md.contains("| smol q8\\|b.gguf | 16 | 32 | 0 | 2000.0 |"));
    QCOMPARE(md.count(QRegularExpression("^\\| smol", QRegularExpression::MultilineOption)), 2 + 6);
    // The verdict paragraph (escaped like every name).
    QVERIFY(md.contains("## Verdict\n\n"));
    QVERIFY(run.verdict.contains("smol q8|b.gguf: 0.80× the batch-1 speed of smol_q4.gguf"));
    QVERIFY(md.contains("smol q8\\|b.gguf: 0.80× the batch-1 speed of smol\\_q4.gguf"));
    QVERIFY(md.contains("mean KLD 0.0020 and top-1 agreement 98.4% against it"));
    // One PNG per metric next to it, each linked and each a chart of the chart's size.
    for (const CompareReportChart& c : compareReportCharts(dir.filePath("cmp.md"))) {
      QVERIFY(md.contains(QString("![%1](%2)").arg(compareMetricTitle(c.metric), c.fileName)));
      QImage image;
      QVERIFY2(image.load(dir.filePath(c.fileName), "PNG"), qPrintable(c.fileName));
      QCOMPARE(image.size(), kCompareReportChartSize);
      QVERIFY(colorCount(image) > 20);
    }
    QCOMPARE(dir.entryList({"*.png"}, QDir::Files).size(), kCompareMetricCount);
    QVERIFY(dir.entryList({"*.png"}).contains("cmp-output-tokens-per-s.png"));
  }
};

QTEST_MAIN(CompareTest)
#include "compare_test.moc"
