// The Dashboard with the real engine (CPU backend, default model): while requests run, the charts'
// series grow from the metrics snapshot (KV blocks, running slots, TTFT points, throughput, prefix
// cache hits); pausing freezes the view but not the recording; charts export PNG and CSV.
#include <QtTest>

#include <QImage>
#include <QLabel>
#include <QSignalSpy>

#include <algorithm>

#include "test_support.h"
#include "ui/app/main_window.h"
#include "ui/bridge/engine_bridge.h"
#include "ui/dashboard/chart_card.h"
#include "ui/dashboard/dashboard_panel.h"
#include "ui_test_support.h"

using namespace lathe::ui;

namespace {

double maxOf(const QVector<QPointF>& points) {
  double m = 0.0;
  for (const QPointF& p : points)
    if (!std::isnan(p.y())) m = std::max(m, p.y());
  return m;
}

// A system prompt long enough to fill several KV blocks, shared by every request.
const QString kSystemPrompt = QStringLiteral(
    "You are a helpful assistant for a machine shop. You answer questions about lathes, milling "
    "machines, drills and measuring tools. Keep every answer short, practical and safe, mention "
    "the tool to use, and never recommend removing a guard. If a question is not about the shop, "
    "say so politely and suggest a question that is.");

GenerationRequest request(const QString& question, int maxTokens) {
  GenerationRequest r;
  r.messages = {{"system", kSystemPrompt}, {"user", question}};
  r.sampling.temperature = 0.0;
  r.sampling.maxTokens = maxTokens;
  return r;
}

}  // namespace

class DashboardTest : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;
  std::unique_ptr<EngineBridge> m_bridge;
  std::unique_ptr<MainWindow> m_window;

  DashboardPanel* dash() const { return m_window->dashboard(); }

  // Runs the requests at once and waits until all have finished.
  bool runRequests(const QStringList& questions, int maxTokens) {
    QSignalSpy finished(m_bridge.get(), &EngineBridge::generationFinished);
    for (const QString& q : questions) m_bridge->generate(request(q, maxTokens));
    QElapsedTimer clock;
    clock.start();
    while (finished.count() < questions.size() && clock.elapsed() < 180000) finished.wait(1000);
    return finished.count() == questions.size();
  }

 private slots:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    test::isolateSettings(m_dir);
    const QString model = QString::fromStdString(lathe::test::default_model_path());
    if (!QFile::exists(model)) QSKIP("default model missing: run scripts/fetch-default-model.sh");
    m_bridge = std::make_unique<EngineBridge>();
    m_window = std::make_unique<MainWindow>(m_bridge.get(), m_dir.filePath("conversations"));
    m_window->show();
    QVERIFY(QTest::qWaitForWindowExposed(m_window.get()));
    QSignalSpy loaded(m_bridge.get(), &EngineBridge::modelLoaded);
    m_window->openModel(model, /*load=*/true);
    QVERIFY(loaded.wait(120000));
    m_window->showPage(MainWindow::kDashboardPage);
  }

  void cleanupTestCase() {
    m_window.reset();
    m_bridge.reset();
  }

  void everyChartExplainsItself() {
    QCOMPARE(dash()->charts().size(), 7);
    for (ChartCard* card : dash()->charts()) {
      auto* caption = card->findChild<QLabel*>("caption");
      QVERIFY(caption && caption->text().size() > 40);
    }
  }

  void seriesGrowWhileRequestsRun() {
    using H = MetricsHistory;
    // Polling runs while loaded, even when idle.
    QTRY_VERIFY_WITH_TIMEOUT(dash()->history().size(H::kRunning) >= 5, 5000);
    const int samplesBefore = dash()->history().size(H::kRunning);
    ChartCard* slotsChart = dash()->chart("Batch slots");
    const int plottedBefore = slotsChart->dataCount(0);

    // One request warms the prefix cache with the system prompt; then four at once, while the
    // visible dashboard redraws 10 times a second and the window stays responsive.
    test::ResponsivenessProbe probe;
    probe.start();
    QVERIFY(runRequests({"How do I center a round bar in a lathe chuck?"}, 16));
    const qint64 finishedBefore = dash()->history().latest().requestsFinished;
    QVERIFY(runRequests({"What speed for drilling steel?", "How to measure a bore?",
                         "Which tool cuts threads?", "How do I square a block?"},
                        24));
    QTRY_VERIFY_WITH_TIMEOUT(dash()->history().latest().requestsFinished >= finishedBefore + 4,
                             5000);
    probe.stop();
    QVERIFY2(probe.maxGapMs() < 100,
             qPrintable(QString("event loop blocked %1 ms").arg(probe.maxGapMs())));

    const MetricsHistory& h = dash()->history();
    QVERIFY(h.size(H::kRunning) > samplesBefore + 5);
    QVERIFY(slotsChart->dataCount(0) > plottedBefore);  // the chart grew too
    QVERIFY(maxOf(h.points(H::kRunning)) >= 2);         // batched together
    QVERIFY(maxOf(h.points(H::kKvUsedBlocks)) > 0);     // blocks were in use
    QVERIFY(h.size(H::kTtftMs) >= 5);                   // a point per request
    QVERIFY(maxOf(h.points(H::kGenerationTokensPerSec)) > 0);
    QVERIFY(maxOf(h.points(H::kPromptTokensPerSec)) > 0);
    QVERIFY(maxOf(h.points(H::kPrefixHitRateTotal)) > 0);  // the shared prompt hit
    QVERIFY(h.size(H::kItlMs) > 0 && maxOf(h.points(H::kItlMs)) > 0);
    QCOMPARE(dash()->chart("Time to first token")->dataCount(0), h.size(H::kTtftMs));
    QTRY_COMPARE_WITH_TIMEOUT(dash()->history().latest().kvUsedBlocks, 0, 5000);  // all finished
    QVERIFY(!dash()->chart("KV cache")->summary().isEmpty());
  }

  void pauseFreezesTheViewButKeepsRecording() {
    ChartCard* kv = dash()->chart("KV cache");
    dash()->setPaused(true);
    const int shown = kv->dataCount(0);
    const qint64 recorded = dash()->history().totalSamples();
    QTest::qWait(600);
    QCOMPARE(kv->dataCount(0), shown);
    QVERIFY(dash()->history().totalSamples() > recorded);
    dash()->setPaused(false);
    QCOMPARE(kv->dataCount(0), dash()->history().size(MetricsHistory::kKvUsedBlocks));
  }

  void chartsExportPngAndCsv() {
    ChartCard* throughput = dash()->chart("Throughput");
    const QString png = m_dir.filePath("throughput.png");
    const QString csv = m_dir.filePath("throughput.csv");
    dash()->setPaused(true);  // the file and the view hold the same points
    QVERIFY(throughput->exportPng(png));
    QVERIFY(throughput->exportCsv(csv));
    QVERIFY(!QImage(png).isNull());
    QFile f(csv);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QStringList lines = QString::fromUtf8(f.readAll()).split('\n', Qt::SkipEmptyParts);
    QCOMPARE(lines.first(), QString("time_s,prompt tok/s,generation tok/s"));
    QCOMPARE(lines.size() - 1, throughput->dataCount(0));
    dash()->setPaused(false);
  }
};

QTEST_MAIN(DashboardTest)
#include "dashboard_test.moc"
