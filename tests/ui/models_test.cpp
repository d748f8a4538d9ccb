// The Models page with the real engine (CPU backend, default model): dropping a model on the
// window fills its card with the numbers `lathe inspect --json` prints; the memory plan follows the
// load settings; load and unload report progress; a corrupt file shows a readable error naming it
// and the window stays usable.
#include <QtTest>

#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QListView>
#include <QProcess>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTabWidget>

#include "test_support.h"
#include "ui/app/main_window.h"
#include "ui/bridge/engine_bridge.h"
#include "ui/common/message_banner.h"
#include "ui/models/model_card.h"
#include "ui/models/models_panel.h"
#include "ui/settings/load_settings_widget.h"
#include "ui_test_support.h"

using namespace lathe::ui;

namespace {

QJsonObject latheInspect(const QStringList& args) {
  QProcess p;
  p.start(QStringLiteral(LATHE_CLI), QStringList{"inspect", "--json"} + args);
  if (!p.waitForFinished(60000) || p.exitCode() != 0) {
    qWarning() << "lathe inspect failed:" << p.readAllStandardError();
    return {};
  }
  return QJsonDocument::fromJson(p.readAllStandardOutput()).object();
}

qint64 raw(ModelCard* card, const char* field) {
  QLabel* label = card->field(QString::fromLatin1(field));
  return label ? label->property("rawValue").toLongLong() : -1;
}

}  // namespace

class ModelsTest : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;
  QString m_model;
  std::unique_ptr<EngineBridge> m_bridge;
  std::unique_ptr<MainWindow> m_window;

  ModelsPanel* models() const { return m_window->models(); }
  ModelCard* card() const { return models()->card(); }

  // Writes `bytes` to a file in the temp folder and returns its path.
  QString writeFile(const QString& name, const QByteArray& bytes) {
    const QString path = m_dir.filePath(name);
    QFile f(path);
    if (f.open(QIODevice::WriteOnly)) f.write(bytes);
    return path;
  }

 private slots:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    test::isolateSettings(m_dir);
    m_model = QString::fromStdString(lathe::test::default_model_path());
    if (!QFile::exists(m_model)) QSKIP("default model missing: run scripts/fetch-default-model.sh");
    m_bridge = std::make_unique<EngineBridge>();
    m_window = std::make_unique<MainWindow>(m_bridge.get(), m_dir.filePath("conversations"));
    m_window->show();
    m_window->activateWindow();
    QVERIFY(QTest::qWaitForWindowActive(m_window.get()));
  }

  void cleanupTestCase() {
    m_window.reset();
    m_bridge.reset();
  }

  void droppedModelCardMatchesLatheInspect() {
    QSignalSpy inspected(m_bridge.get(), &EngineBridge::modelInspected);
    test::ResponsivenessProbe probe;
    probe.start();
    QVERIFY(test::dropFile(m_window.get(), m_model));
    QVERIFY(inspected.wait(30000));
    probe.stop();
    QVERIFY2(probe.maxGapMs() < 100,
             qPrintable(QString("event loop blocked %1 ms").arg(probe.maxGapMs())));
    QCOMPARE(m_window->pages()->currentWidget(), models());

    // The default preset plans max-model-len = the model's context, 64 sequences (CPU).
    const QJsonObject j = latheInspect({m_model, "--batch", "64"});
    QVERIFY2(!j.isEmpty(), "lathe inspect --json printed nothing");
    QCOMPARE(card()->field("architecture")->text(), j["architecture"].toString());
    QCOMPARE(raw(card(), "parameters"), j["parameters"].toInteger());
    QCOMPARE(raw(card(), "layers"), j["layers"].toInteger());
    QCOMPARE(raw(card(), "heads"), j["heads"].toInteger());
    QCOMPARE(raw(card(), "kvHeads"), j["kv_heads"].toInteger());
    QCOMPARE(raw(card(), "headDim"), j["head_dim"].toInteger());
    QCOMPARE(raw(card(), "hiddenSize"), j["hidden_size"].toInteger());
    QCOMPARE(raw(card(), "context"), j["context_length"].toInteger());
    QCOMPARE(raw(card(), "fileSize"), j["file_bytes"].toInteger());
    QCOMPARE(card()->field("dtype")->text(), j["dtypes"].toObject()["mlp"].toString());
    const QJsonObject mem = j["memory"].toObject();
    QCOMPARE(raw(card(), "weightsFp16"), mem["weights"].toObject()["fp16"].toInteger());
    QCOMPARE(raw(card(), "weightsInt8"), mem["weights"].toObject()["int8"].toInteger());
    QCOMPARE(raw(card(), "weightsInt4"), mem["weights"].toObject()["int4"].toInteger());
    QCOMPARE(raw(card(), "weightsLoaded"), mem["weights"].toObject()["stored"].toInteger());
    QCOMPARE(raw(card(), "kvPerToken"), mem["kv_per_token"].toObject()["fp32"].toInteger());
    QCOMPARE(raw(card(), "kvPlan"), mem["kv"].toObject()["fp32"].toInteger());
    const QJsonObject fit = mem["fit"].toObject();
    QCOMPARE(raw(card(), "budget"), fit["budget_bytes"].toInteger());
    const QString verdict = fit["verdict"].toString();
    const int expected = verdict == "fits" ? 0 : verdict == "fits_fewer_sequences" ? 1 : 2;
    QCOMPARE(raw(card(), "verdict"), qint64{expected});
    // The model is now in the recent list.
    QCOMPARE(models()->findChild<QListView*>("recentModels")->model()->rowCount(), 1);
    QCOMPARE(models()
                 ->findChild<QListView*>("recentModels")
                 ->model()
                 ->index(0, 0)
                 .data(Qt::ToolTipRole)
                 .toString(),
             m_model);
  }

  void droppedHuggingFaceFolderFillsTheCard() {
    const QString folder = QString::fromStdString(lathe::test::fixture_path("models/qwen2_tied"));
    QSignalSpy inspected(m_bridge.get(), &EngineBridge::modelInspected);
    // Dropping a file of the folder (config.json) opens the folder.
    QVERIFY(test::dropFile(m_window.get(), folder + "/config.json"));
    QVERIFY(inspected.wait(30000));
    QCOMPARE(models()->currentPath(), folder);
    const QJsonObject j = latheInspect({folder, "--batch", "64"});
    QVERIFY(!j.isEmpty());
    QCOMPARE(card()->field("architecture")->text(), QString("qwen2"));
    QCOMPARE(card()->field("architecture")->text(), j["architecture"].toString());
    QVERIFY(card()->field("format")->text().contains("Hugging Face"));
    QCOMPARE(raw(card(), "parameters"), j["parameters"].toInteger());
    QCOMPARE(raw(card(), "kvHeads"), j["kv_heads"].toInteger());
    QCOMPARE(raw(card(), "fileSize"), j["file_bytes"].toInteger());
    QCOMPARE(raw(card(), "kvPerToken"),
             j["memory"].toObject()["kv_per_token"].toObject()["fp32"].toInteger());
    QCOMPARE(card()->field("chatTemplate")->property("rawValue").toBool(),
             j["has_chat_template"].toBool());
    // Back to the default model for the tests below.
    QVERIFY(test::dropFile(m_window.get(), m_model));
    QVERIFY(inspected.wait(30000));
  }

  void planFollowsTheLoadSettings() {
    auto* seqs = models()->loadSettings()->findChild<QSpinBox*>("maxNumSeqs");
    auto* len = models()->loadSettings()->findChild<QSpinBox*>("maxModelLen");
    seqs->setValue(2);
    len->setValue(2048);
    const QJsonObject j = latheInspect({m_model, "--max-model-len", "2048", "--batch", "2"});
    const QJsonObject mem = j["memory"].toObject();
    QCOMPARE(raw(card(), "kvPlan"), mem["kv"].toObject()["fp32"].toInteger());
    QCOMPARE(raw(card(), "kvPlan"), 2 * 2048 * raw(card(), "kvPerToken"));
    QCOMPARE(raw(card(), "verdict"), qint64{0});  // 2 × 2048 tokens of a 135M model fit in RAM
    QVERIFY(card()->verdictText().contains("Fits"));
    // Absurd settings: the verdict says it does not fit, and what to change.
    len->setValue(1 << 20);
    seqs->setValue(4096);
    QCOMPARE(raw(card(), "verdict"), qint64{2});
    QVERIFY(!card()->field("verdict")->text().isEmpty());
    models()->loadSettings()->applyPreset("Default");
  }

  void corruptFileShowsReadableErrorAndWindowStaysUsable() {
    QFile real(m_model);
    QVERIFY(real.open(QIODevice::ReadOnly));
    const QString truncated = writeFile("truncated.gguf", real.read(64 * 1024));  // header only
    const QString garbage = writeFile("garbage.gguf", QByteArray(4096, '\x5a'));
    for (const QString& path : {truncated, garbage}) {
      QSignalSpy failed(m_bridge.get(), &EngineBridge::inspectFailed);
      QVERIFY(test::dropFile(m_window.get(), path));
      QVERIFY(failed.wait(30000));
      const QString shown = models()->banner()->text();
      QVERIFY2(shown.contains(QFileInfo(path).fileName()), qPrintable(shown));
      QVERIFY2(shown.size() > QFileInfo(path).fileName().size() + 20,
               qPrintable(shown));  // says why
      QVERIFY(!models()->findChild<QPushButton*>("loadButton")->isEnabled());
    }
    // Loading it anyway (bypassing the card) fails the same way, and nothing is loaded.
    QSignalSpy loadFailed(m_bridge.get(), &EngineBridge::loadFailed);
    m_bridge->loadModel(garbage, LoadSettings{});
    QVERIFY(loadFailed.wait(30000));
    QVERIFY(loadFailed.at(0).at(1).toString().size() > 10);
    QCOMPARE(m_bridge->state(), EngineBridge::State::kEmpty);
    // A file that is not a model at all is refused at the drag.
    QVERIFY(!test::dropFile(m_window.get(), writeFile("notes.txt", "hello")));
    // The window still works: shortcuts switch pages, and the real model opens again.
    QTest::keyClick(m_window.get(), Qt::Key_2, Qt::ControlModifier);
    QCOMPARE(m_window->pages()->currentIndex(), int(MainWindow::kChatPage));
    QSignalSpy inspected(m_bridge.get(), &EngineBridge::modelInspected);
    QVERIFY(test::dropFile(m_window.get(), m_model));
    QVERIFY(inspected.wait(30000));
    QVERIFY(models()->banner()->text().isEmpty());
    QVERIFY(raw(card(), "layers") > 0);
  }

  void cancelStopsALoad() {
    QSignalSpy cancelled(m_bridge.get(), &EngineBridge::loadCancelled);
    QSignalSpy loaded(m_bridge.get(), &EngineBridge::modelLoaded);
    m_bridge->loadModel(m_model, LoadSettings{});
    // Reading the model takes far longer than this call: the cancel lands before the next stage.
    QTest::mouseClick(models()->findChild<QPushButton*>("cancelButton"), Qt::LeftButton);
    QVERIFY(cancelled.wait(60000));
    QCOMPARE(loaded.count(), 0);
    QCOMPARE(m_bridge->state(), EngineBridge::State::kEmpty);
    QVERIFY(models()->findChild<QLabel*>("loadStatus")->text().contains("cancelled"));
  }

  void loadAndUnloadWithProgress() {
    QSignalSpy progress(m_bridge.get(), &EngineBridge::loadProgress);
    QSignalSpy loaded(m_bridge.get(), &EngineBridge::modelLoaded);
    auto* load = models()->findChild<QPushButton*>("loadButton");
    auto* unload = models()->findChild<QPushButton*>("unloadButton");
    QVERIFY(load->isEnabled());
    test::ResponsivenessProbe probe;
    probe.start();
    QTest::mouseClick(load, Qt::LeftButton);
    QCOMPARE(m_bridge->state(), EngineBridge::State::kLoading);
    QVERIFY(models()->findChild<QPushButton*>("cancelButton")->isEnabled());
    QVERIFY(loaded.wait(60000));
    probe.stop();
    QVERIFY2(probe.maxGapMs() < 100,
             qPrintable(QString("event loop blocked %1 ms").arg(probe.maxGapMs())));
    QVERIFY(progress.count() >= 1);
    QCOMPARE(m_bridge->state(), EngineBridge::State::kLoaded);
    QVERIFY(models()->findChild<QLabel*>("loadStatus")->text().contains("KV cache"));
    QVERIFY(unload->isEnabled());
    QVERIFY(!load->isEnabled());  // the same model is loaded
    QSignalSpy unloaded(m_bridge.get(), &EngineBridge::modelUnloaded);
    QTest::mouseClick(unload, Qt::LeftButton);
    QVERIFY(unloaded.wait(30000));
    QCOMPARE(m_bridge->state(), EngineBridge::State::kEmpty);
    QVERIFY(load->isEnabled());
  }
};

QTEST_MAIN(ModelsTest)
#include "models_test.moc"
