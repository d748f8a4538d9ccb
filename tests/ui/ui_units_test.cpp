// Lathe Studio's data classes and widgets that need no engine: load settings and presets,
// conversations and their store, the request log model, the dashboard's rolling history and chart
// export, model path detection for drag-and-drop, the load settings form.
#include <QtTest>

#include <QComboBox>
#include <QFile>
#include <QImage>
#include <QJsonDocument>
#include <QLabel>
#include <QMimeData>
#include <QSignalSpy>
#include <QSlider>
#include <QSpinBox>
#include <QUrl>

#include <cmath>

#include <qcustomplot.h>
#include <QApplication>

#include "ui/chat/conversation.h"
#include "ui/chat/conversation_store.h"
#include "ui/common/message_banner.h"
#include "ui/compare/compare_panel.h"
#include "ui/compare/compare_results.h"
#include "ui/dashboard/chart_card.h"
#include "ui/dashboard/metrics_history.h"
#include "ui/models/model_drop.h"
#include "ui/models/recent_models.h"
#include "ui/quantize/literature_quality.h"
#include "ui/quantize/recommendation.h"
#include "ui/serve/request_log_model.h"
#include "ui/settings/appearance.h"
#include "ui/settings/load_settings.h"
#include "ui/settings/load_settings_widget.h"
#include "ui/settings/preferences_dialog.h"
#include "ui/settings/preset_store.h"
#include "ui_test_support.h"

using namespace lathe::ui;

namespace {

MetricsSample sampleAt(double t) {
  MetricsSample s;
  s.timeSec = t;
  s.kvTotalBlocks = 100;
  s.kvUsedBlocks = 10;
  s.kvCachedBlocks = 5;
  s.kvFreeBlocks = 85;
  s.kvUsagePercent = 10.0;
  s.maxNumSeqs = 8;
  return s;
}

void writeFile(const QString& path, const QByteArray& bytes) {
  QFile f(path);
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write(bytes);
}

}  // namespace

class UiUnitsTest : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;

 private slots:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    test::isolateSettings(m_dir);
  }

  void loadSettingsRoundTripAndRejectBadValues() {
    LoadSettings s;
    s.device = "cpu";
    s.dtype = "f16";
    s.gpuMemoryUtilization = 0.5;
    s.maxModelLen = 4096;
    s.maxNumSeqs = 8;
    s.maxNumBatchedTokens = 1024;
    s.enablePrefixCaching = false;
    s.scheduling = "static";
    QCOMPARE(LoadSettings::fromVariantMap(s.toVariantMap()), s);
    // Garbage from a hand-edited settings file falls back to defaults, field by field.
    const LoadSettings bad = LoadSettings::fromVariantMap(
        {{"device", "tpu"}, {"gpuMemoryUtilization", 1.5}, {"maxModelLen", -3}, {"scheduling", 7}});
    QCOMPARE(bad.device, QString("auto"));
    QCOMPARE(bad.gpuMemoryUtilization, 0.90);
    QCOMPARE(bad.maxModelLen, 0);
    QCOMPARE(bad.scheduling, QString("continuous"));
  }

  void presetsSaveSetDefaultAndProtectTheBuiltin() {
    PresetStore store;
    QSignalSpy changed(&store, &PresetStore::presetsChanged);
    QCOMPARE(store.names(), QStringList{PresetStore::builtinName()});
    LoadSettings longCtx;
    longCtx.maxModelLen = 32768;
    longCtx.maxNumSeqs = 4;
    QVERIFY(store.save("Long context", longCtx));
    QString error;
    QVERIFY(!store.save(PresetStore::builtinName(), longCtx, &error));
    QVERIFY(error.contains("built-in"));
    QVERIFY(!store.save("  ", longCtx, &error));
    QCOMPARE(store.preset("Long context"), longCtx);
    store.setDefaultPreset("Long context");
    QCOMPARE(store.defaultPresetName(), QString("Long context"));
    // A second store (a later run) sees the same presets.
    PresetStore again;
    QCOMPARE(again.defaultPreset(), longCtx);
    QVERIFY(store.remove("Long context"));
    QCOMPARE(store.defaultPresetName(), PresetStore::builtinName());
    QVERIFY(!store.remove(PresetStore::builtinName()));
    QVERIFY(changed.count() >= 3);
  }

  void loadSettingsFormEmitsEditsAndSavesPresets() {
    PresetStore store;
    LoadSettingsWidget form(&store);
    QSignalSpy spy(&form, &LoadSettingsWidget::settingsChanged);
    auto* seqs = form.findChild<QSpinBox*>("maxNumSeqs");
    auto* util = form.findChild<QSlider*>("gpuMemoryUtilization");
    QVERIFY(seqs && util);
    seqs->setValue(12);
    util->setValue(75);
    QVERIFY(spy.count() >= 2);
    QCOMPARE(form.settings().maxNumSeqs, 12);
    QCOMPARE(form.settings().gpuMemoryUtilization, 0.75);
    QVERIFY(form.savePresetAs("Twelve"));
    form.setCurrentPresetAsDefault();
    QCOMPARE(store.defaultPresetName(), QString("Twelve"));
    // A new form opens on the default preset.
    LoadSettingsWidget next(&store);
    QCOMPARE(next.settings().maxNumSeqs, 12);
    QCOMPARE(next.currentPresetName(), QString("Twelve"));
    QVERIFY(next.applyPreset(PresetStore::builtinName()));
    QCOMPARE(next.settings(), LoadSettings{});
    // No GPU: the CUDA entry is disabled and a CUDA choice falls back to auto.
    LoadSettings cuda;
    cuda.device = "cuda";
    next.setSettings(cuda);
    next.setGpuAvailable(false, QString());
    QCOMPARE(next.settings().device, QString("auto"));
    store.remove("Twelve");
  }

  void conversationJsonRoundTrip() {
    Conversation c = Conversation::create();
    c.title = "Lathes";
    c.systemPrompt = "Be brief.";
    c.sampling.temperature = 0.0;
    c.sampling.seed = 18446744073709551615ull;  // every bit of a 64-bit seed survives JSON
    GenerationStats stats;
    stats.promptTokens = 21;
    stats.completionTokens = 9;
    stats.ttftMs = 41.5;
    stats.tokensPerSecond = 55.2;
    stats.finishReason = "stop";
    c.messages = {{"user", "What is a lathe?", std::nullopt},
                  {"assistant", "A machine **tool**.", stats}};
    Conversation back;
    QString error;
    QVERIFY2(Conversation::fromJson(c.toJson(), &back, &error), qPrintable(error));
    QCOMPARE(back.id, c.id);
    QCOMPARE(back.systemPrompt, c.systemPrompt);
    QCOMPARE(*back.sampling.seed, *c.sampling.seed);
    QCOMPARE(back.messages.size(), 2);
    QVERIFY(!back.messages[0].stats);
    QCOMPARE(back.messages[1].stats->ttftMs, 41.5);
    QCOMPARE(back.messages[1].stats->finishReason, QString("stop"));
    const QVector<ChatTurn> turns = back.turns();
    QCOMPARE(turns.size(), 3);
    QCOMPARE(turns[0].role, QString("system"));
    // Wrong shapes are refused with a reason.
    QVERIFY(!Conversation::fromJson(QJsonObject{{"format", "other"}}, &back, &error));
    QJsonObject badRole = c.toJson();
    badRole["messages"] = QJsonArray{QJsonObject{{"role", "tool"}, {"content", "x"}}};
    QVERIFY(!Conversation::fromJson(badRole, &back, &error));
    QVERIFY(error.contains("tool"));
  }

  void conversationStoreSavesRenamesDeletesAndSkipsBrokenFiles() {
    const QString folder = m_dir.filePath("conversations");
    ConversationStore store(folder);
    QCOMPARE(store.rowCount(), 0);
    Conversation a = Conversation::create();
    a.title = "First";
    a.messages = {{"user", "hi", std::nullopt}};
    Conversation b = Conversation::create();
    b.title = "Second";
    b.messages = {{"user", "hello", std::nullopt}};
    QVERIFY(store.save(a));
    QVERIFY(store.save(b));
    QCOMPARE(store.rowCount(), 2);
    QCOMPARE(store.idAt(0), b.id);  // newest first
    QVERIFY(QFile::exists(folder + "/" + a.id + ".json"));
    QVERIFY(store.rename(a.id, "  Renamed  "));
    Conversation loaded;
    QVERIFY(store.load(a.id, &loaded));
    QCOMPARE(loaded.title, QString("Renamed"));
    // Editing the list item renames too.
    QVERIFY(store.setData(store.index(store.indexOf(b.id)), "Via model", Qt::EditRole));
    QCOMPARE(store.data(store.index(store.indexOf(b.id)), Qt::DisplayRole).toString(),
             QString("Via model"));
    // A broken file is reported and renamed aside (kept, not read again), never fatal.
    const QString broken = folder + "/0badf00d-0000-0000-0000-000000000000.json";
    writeFile(broken, "{ not json");
    store.reload();
    QCOMPARE(store.rowCount(), 2);
    QVERIFY(store.lastError().contains("0badf00d"));
    QVERIFY(store.lastError().contains("set aside"));
    QVERIFY(!QFile::exists(broken));
    const QStringList aside =
        QDir(folder).entryList({"0badf00d-0000-0000-0000-000000000000.json.corrupt-*"});
    QCOMPARE(aside.size(), 1);
    QVERIFY(store.lastError().contains(aside[0]));
    QFile kept(folder + "/" + aside[0]);
    QVERIFY(kept.open(QIODevice::ReadOnly));
    QCOMPARE(kept.readAll(), QByteArray("{ not json"));
    store.reload();
    QVERIFY(store.lastError().isEmpty());  // reported once
    QCOMPARE(store.rowCount(), 2);
    QVERIFY(store.remove(a.id));
    QVERIFY(!QFile::exists(folder + "/" + a.id + ".json"));
    QCOMPARE(store.rowCount(), 1);
    // Ids never escape the folder.
    QVERIFY(!store.load("../../etc/passwd", &loaded));
  }

  void requestLogKeepsTheNewestRows() {
    RequestLogModel log(3);
    for (int i = 0; i < 5; ++i) {
      RequestLogEntry e;
      e.id = QString("req-%1").arg(i);
      e.promptTokens = 10 + i;
      e.ttftMs = 12.5;
      e.finishReason = "stop";
      log.append(e);
    }
    QCOMPARE(log.rowCount(), 3);
    QCOMPARE(log.entry(0).id, QString("req-2"));
    QCOMPARE(log.data(log.index(2, RequestLogModel::kPromptTokens), Qt::DisplayRole).toInt(), 14);
    QCOMPARE(log.headerData(RequestLogModel::kTtft, Qt::Horizontal, Qt::DisplayRole).toString(),
             QString("TTFT (ms)"));
  }

  void metricsHistoryDerivesSeriesAndRollsTheWindow() {
    MetricsHistory h(10.0);  // 10 s window
    MetricsSample s = sampleAt(0.0);
    s.itlSumSec = 1.0;
    s.itlCount = 100;
    s.prefixCacheQueries = 100;
    s.prefixCacheHits = 0;
    h.append(s);
    QCOMPARE(h.size(MetricsHistory::kItlMs), 0);  // needs two samples
    s = sampleAt(1.0);
    s.itlSumSec = 1.5;  // +0.5 s over +10 tokens -> 50 ms
    s.itlCount = 110;
    s.prefixCacheQueries = 300;
    s.prefixCacheHits = 150;
    s.newTtft = {{0.7, 120.0}, {0.9, 80.0}};
    h.append(s);
    QCOMPARE(h.points(MetricsHistory::kItlMs).back().y(), 50.0);
    // Hit rate over the window: 150 hits of 200 new queries.
    QCOMPARE(h.points(MetricsHistory::kPrefixHitRateWindow).back().y(), 75.0);
    QCOMPARE(h.points(MetricsHistory::kPrefixHitRateTotal).back().y(), 50.0);
    QCOMPARE(h.size(MetricsHistory::kTtftMs), 2);
    QCOMPARE(h.ttftPercentileMs(50), 80.0);
    QCOMPARE(h.ttftPercentileMs(95), 120.0);
    // No tokens in an interval: a gap, not a zero.
    s = sampleAt(2.0);
    s.itlSumSec = 1.5;
    s.itlCount = 110;
    h.append(s);
    QVERIFY(std::isnan(h.points(MetricsHistory::kItlMs).back().y()));
    // Roll past the window: old points go.
    for (int t = 3; t <= 20; ++t) h.append(sampleAt(t));
    QCOMPARE(h.points(MetricsHistory::kKvUsedBlocks).front().x(), 10.0);
    QCOMPARE(h.size(MetricsHistory::kTtftMs), 0);
    QVERIFY(std::isnan(h.ttftPercentileMs(50)));
    // A new engine (clock restarts) starts a new history.
    h.append(sampleAt(0.5));
    QCOMPARE(h.size(MetricsHistory::kKvUsedBlocks), 1);
  }

  void chartExportsPngAndCsv() {
    ChartCard card("Batch slots", "What am I looking at.");
    const int running = card.addSeries("running", Qt::blue);
    const int waiting = card.addSeries("waiting", Qt::red);
    card.setSeries(running, {{0.0, 1.0}, {0.1, 2.0}, {0.2, std::nan("")}});
    card.setSeries(waiting, {{0.0, 0.0}, {0.1, 3.0}, {0.2, 1.0}});
    card.setTimeRange(0.0, 0.2);
    card.resize(600, 300);
    const QString csv = card.csvText();
    QCOMPARE(csv.split('\n', Qt::SkipEmptyParts).size(), 4);
    QVERIFY(csv.startsWith("time_s,running,waiting\n"));
    QVERIFY(csv.contains("0.200,,1\n"));  // NaN is an empty cell
    const QString png = m_dir.filePath("chart.png");
    const QString csvPath = m_dir.filePath("chart.csv");
    QVERIFY(card.exportPng(png));
    QVERIFY(card.exportCsv(csvPath));
    QImage image(png);
    QVERIFY(!image.isNull());
    QVERIFY(image.width() > 100 && image.height() > 100);
    QFile f(csvPath);
    QVERIFY(f.open(QIODevice::ReadOnly));
    QCOMPARE(QString::fromUtf8(f.readAll()), csv);
    // Series with different times are written in long form.
    card.setSeries(waiting, {{0.05, 1.0}});
    QVERIFY(card.csvText().startsWith("time_s,series,value\n"));
    QString error;
    QVERIFY(!card.exportCsv("/proc/no/such/dir/x.csv", &error));
    QVERIFY(error.contains("x.csv"));
  }

  void chartsAndBannersFollowThePalette() {
    // Palette changes reach widgets of shown windows (as in the application).
    QWidget window;
    auto* layout = new QVBoxLayout(&window);
    auto* cardPtr = new ChartCard("Throughput", "Caption.");
    auto* bannerPtr = new MessageBanner;
    layout->addWidget(cardPtr);
    layout->addWidget(bannerPtr);
    ChartCard& card = *cardPtr;
    MessageBanner& banner = *bannerPtr;
    banner.showMessage(MessageBanner::Kind::kError, "x");
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    applyAppearance(Appearance::kDark);
    QVERIFY(QApplication::palette().color(QPalette::Base).lightness() < 80);
    QTRY_COMPARE(card.plot()->xAxis->tickLabelColor(),
                 QApplication::palette().color(QPalette::WindowText));
    QVERIFY(card.plot()->xAxis->tickLabelColor().lightness() > 150);  // light text on dark
    QVERIFY(banner.palette().color(QPalette::Window).lightness() <
            100);  // a tint of the dark window
    applyAppearance(Appearance::kLight);
    QTRY_COMPARE(card.plot()->xAxis->tickLabelColor(),
                 QApplication::palette().color(QPalette::WindowText));
    QVERIFY(card.plot()->xAxis->tickLabelColor().lightness() < 100);  // dark text on light
    QVERIFY(banner.palette().color(QPalette::Window).lightness() > 150);
    applyAppearance(Appearance::kSystem);
    Appearance parsed;
    QVERIFY(parseAppearance("dark", &parsed) && parsed == Appearance::kDark);
    QVERIFY(!parseAppearance("purple", &parsed));
  }

  void preferencesRoundTrip() {
    Preferences p;
    p.startup = Preferences::Startup::kLastModel;
    p.cpuThreads = 3;
    p.appearance = Appearance::kDark;
    p.save();
    const Preferences back = Preferences::load();
    QCOMPARE(back.startup, Preferences::Startup::kLastModel);
    QCOMPARE(back.cpuThreads, 3);
    QCOMPARE(back.appearance, Appearance::kDark);
    PresetStore presets;
    PreferencesDialog dialog(&presets, m_dir.filePath("conversations"));
    QCOMPARE(dialog.preferences().cpuThreads, 3);  // the dialog opens on the saved values
    QCOMPARE(dialog.preferences().appearance, Appearance::kDark);
    Preferences().save();  // back to defaults
    QCOMPARE(Preferences::load().startup, Preferences::Startup::kDefaultModel);
  }

  void dropAcceptsModelsAndFoldersOnly() {
    const QString gguf = m_dir.filePath("tiny.gguf");
    writeFile(gguf, "GGUF");
    const QString folder = m_dir.filePath("hf-model");
    QVERIFY(QDir().mkpath(folder));
    writeFile(folder + "/config.json", "{}");
    const QString text = m_dir.filePath("notes.txt");
    writeFile(text, "hello");
    QCOMPARE(modelPathForLocalFile(gguf), gguf);
    QCOMPARE(modelPathForLocalFile(folder), folder);
    QCOMPARE(modelPathForLocalFile(folder + "/config.json"),
             folder);  // a file stands for its folder
    QCOMPARE(modelPathForLocalFile(text), QString());
    QCOMPARE(modelPathForLocalFile(m_dir.filePath("missing.gguf")), QString());
    QMimeData mime;
    mime.setUrls({QUrl::fromLocalFile(text), QUrl::fromLocalFile(gguf)});
    QCOMPARE(modelPathFromMimeData(&mime), gguf);
    mime.setUrls({QUrl("https://example.com/model.gguf")});
    QCOMPARE(modelPathFromMimeData(&mime), QString());
  }

  void recentModelsKeepsTenNewestFirst() {
    RecentModels recent;
    recent.clear();
    for (int i = 0; i < 12; ++i) recent.add(m_dir.filePath(QString("m%1.gguf").arg(i)));
    QCOMPARE(recent.paths().size(), RecentModels::kMaxEntries);
    QCOMPARE(recent.paths().front(), m_dir.filePath("m11.gguf"));
    recent.add(m_dir.filePath("m5.gguf"));
    QCOMPARE(recent.paths().front(), m_dir.filePath("m5.gguf"));
    QCOMPARE(recent.paths().size(), RecentModels::kMaxEntries);
    QVERIFY(recent.data(recent.index(0), Qt::DisplayRole).toString().contains("missing"));
    RecentModels again;
    QCOMPARE(again.paths(), recent.paths());
  }

  void recommendation_follows_the_goal() {
    // Three fake candidates: big and best, middle, small and fastest; one disabled.
    auto make = [](const char* scheme, qint64 bytes, double tps, MemoryPlan::Verdict v) {
      QuantCandidate c;
      c.scheme = QString::fromLatin1(scheme);
      c.label = c.scheme;
      c.expectedBytes = bytes;
      c.tokensPerSecond = tps;
      c.plan.verdict = v;
      c.plan.kvBytesForPlan = 100;
      applyLiteratureQuality(c);
      return c;
    };
    const auto fits = MemoryPlan::Verdict::kFits;
    QVector<QuantCandidate> cs = {make("q8_0", 8000, 10, MemoryPlan::Verdict::kDoesNotFit),
                                  make("q6_k", 6000, 13, fits), make("q4_0", 4000, 20, fits),
                                  make("gptq", 3000, 30, fits)};
    cs[3].bits = 4;
    cs[3].enabled = false;
    QCOMPARE(cs[0].qualitySource, QualitySource::kLiterature);
    QCOMPARE(recommendCandidate(cs, QuantGoal::kBestQuality).index, 1);      // q8_0 does not fit
    QCOMPARE(recommendCandidate(cs, QuantGoal::kFastest).index, 2);          // gptq is disabled
    QCOMPARE(recommendCandidate(cs, QuantGoal::kFitBudget, 9000).index, 0);  // budget, not device
    QCOMPARE(recommendCandidate(cs, QuantGoal::kFitBudget, 5000).index, 2);
    const Recommendation none = recommendCandidate(cs, QuantGoal::kFitBudget, 1000);
    QCOMPARE(none.index, -1);
    QVERIFY(none.why.contains("raise the budget"));
    QCOMPARE(recommendCandidate(cs, QuantGoal::kSpecific).index, -1);
    QVERIFY(recommendCandidate(cs, QuantGoal::kBestQuality).why.contains("+0.0217 PPL"));
  }

  void concurrency_levels_parse_or_say_why() {
    QString error;
    QCOMPARE(parseConcurrencyLevels(" 1, 4,16 ,300", &error), (QVector<int>{1, 4, 16, 300}));
    for (const char* bad : {"", "1, 0", "1, -4", "1, x", "5000", "1.5"}) {
      error.clear();
      QVERIFY2(parseConcurrencyLevels(QString::fromLatin1(bad), &error).isEmpty(), bad);
      QVERIFY2(!error.isEmpty(), bad);
    }
  }

  void compare_csv_quotes_and_keeps_every_level() {
    CompareVariant a;
    a.name = "with, comma \"q\"";
    a.path = "/m/a.gguf";
    a.sweep = {ComparePoint{1, 4, 0, 10.5}, ComparePoint{4, 8, 0, 30.25}};
    CompareVariant b;
    b.name = "b";
    b.error = "cannot load";
    const QList<QByteArray> lines = compareToCsv({a, b}).trimmed().split('\n');
    QCOMPARE(lines.size(), 1 + 2 + 1);
    QVERIFY(lines[1].startsWith("\"with, comma \"\"q\"\"\",/m/a.gguf,"));
    QVERIFY(lines[2].contains(",4,8,0,30.250,"));
    QVERIFY(lines[3].endsWith(",cannot load"));
    QCOMPARE(lines[0].count(','), lines[3].count(','));
  }
};

QTEST_MAIN(UiUnitsTest)
#include "ui_units_test.moc"
