// The Compare tab with the real engine (CPU): the default model against its Q8_0 made by the
// quantization library, a tiny sweep (concurrency 1 and 2, 16 prompt and 8 output tokens). The
// table has both variants, the chart one series per variant with one point per level, the exports
// hold every number, Stop ends a run within seconds, bad choices are refused with a reason, and
// the window never stalls.
#include <QtTest>

#include <qcustomplot.h>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSignalSpy>

#include "engine/quant/quantize_model.h"
#include "test_support.h"
#include "ui/bridge/compare_task.h"
#include "ui/bridge/quality_eval.h"
#include "ui/common/message_banner.h"
#include "ui/compare/compare_panel.h"
#include "ui/compare/compare_results.h"
#include "ui_test_support.h"

using namespace lathe::ui;

class CompareTest : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;
  QString m_model;
  QString m_q8;
  std::unique_ptr<ComparePanel> m_panel;

 private slots:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    test::isolateSettings(m_dir);
    m_model = QString::fromStdString(lathe::test::default_model_path());
    if (!QFile::exists(m_model)) QSKIP("default model missing: run scripts/fetch-default-model.sh");
    m_q8 = m_dir.filePath("smol-q8_0.gguf");
    lathe::QuantizeRequest r;
    r.model = m_model.toStdString();
    r.output = m_q8.toStdString();
    r.scheme.scheme = "q8_0";
    auto job = lathe::QuantizeJob::prepare(r);
    QVERIFY2(job.is_ok(), job.status().message().c_str());
    auto done = job.value()->run(nullptr, nullptr);
    QVERIFY2(done.is_ok(), done.status().message().c_str());
    m_panel = std::make_unique<ComparePanel>([] { return LoadSettings{}; });
    m_panel->resize(1100, 800);
    m_panel->show();
  }

  void cleanupTestCase() { m_panel.reset(); }

  void bad_choices_are_refused() {
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
    m_panel->setModels({m_model, m_q8});
    m_panel->setConcurrency("1, 2");
    m_panel->setLengths(16, 8);
    QSignalSpy finished(m_panel.get(), &ComparePanel::comparisonFinished);
    test::ResponsivenessProbe probe;
    probe.start();
    QVERIFY(m_panel->run());
    QVERIFY(finished.wait(240000));
    probe.stop();
    QCOMPARE(finished.first().first().toBool(), false);
    QVERIFY2(probe.maxGapMs() < 100,
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
    const QString csv = m_dir.filePath("cmp.csv");
    QVERIFY(m_panel->exportTo(csv));
    QFile f(csv);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QList<QByteArray> lines = f.readAll().trimmed().split('\n');
    QCOMPARE(lines.size(), 1 + 2 * 2);
    QVERIFY(lines[0].startsWith("model,path,storage"));
    const QString json = m_dir.filePath("cmp.json");
    QVERIFY(m_panel->exportTo(json));
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
    m_panel->setModels({m_model, m_q8});
    m_panel->setConcurrency("1, 2, 4, 8");
    m_panel->setLengths(16, 32);
    QSignalSpy finished(m_panel.get(), &ComparePanel::comparisonFinished);
    // Stop as soon as the sweep of the first model starts.
    QElapsedTimer sinceStop;
    auto conn = connect(m_panel->task(), &CompareTask::progress, this,
                        [this, &sinceStop](const CompareProgressInfo& p) {
                          if (!p.stage.contains("concurrency") || sinceStop.isValid()) return;
                          sinceStop.start();
                          m_panel->stop();
                        });
    QVERIFY(m_panel->run());
    QVERIFY(finished.wait(120000));
    disconnect(conn);
    QVERIFY(sinceStop.isValid());
    QVERIFY2(sinceStop.elapsed() < 5000,
             qPrintable(QString("stopped after %1 ms").arg(sinceStop.elapsed())));
    QCOMPARE(finished.first().first().toBool(), true);
    QVERIFY(m_panel->results()->variants().isEmpty());
  }
};

QTEST_MAIN(CompareTest)
#include "compare_test.moc"
