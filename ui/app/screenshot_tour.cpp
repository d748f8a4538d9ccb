#include "ui/app/screenshot_tour.h"

#include <QApplication>
#include <QDir>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QNetworkRequest>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QTabWidget>

#include "ui/app/main_window.h"
#include "ui/bridge/engine_bridge.h"
#include "ui/bridge/quantize_task.h"
#include "ui/chat/chat_panel.h"
#include "ui/compare/compare_panel.h"
#include "ui/models/models_panel.h"
#include "ui/quantize/goal_page.h"
#include "ui/quantize/output_page.h"
#include "ui/quantize/quantize_wizard.h"
#include "ui/serve/serve_panel.h"
#include "ui/settings/appearance.h"

namespace lathe::ui {

namespace {

const char* const kTopics[] = {
    "tides",     "bread yeast",      "the printing press", "volcanoes",      "honey bees",
    "compilers", "the moon landing", "photosynthesis",     "chess openings", "suspension bridges",
    "jazz",      "glaciers",
};

// Waits without blocking the event loop.
void settle(int ms) {
  QEventLoop loop;
  QTimer::singleShot(ms, &loop, &QEventLoop::quit);
  loop.exec();
}

// Waits (without blocking the event loop) for `signal` of `sender`; false after `ms`.
template <typename Sender, typename Signal>
bool waitFor(Sender* sender, Signal signal, int ms) {
  QEventLoop loop;
  QTimer::singleShot(ms, &loop, [&loop] { loop.exit(1); });
  QObject::connect(sender, signal, &loop, [&loop] { loop.exit(0); });
  return loop.exec() == 0;
}

}  // namespace

ScreenshotTour::ScreenshotTour(MainWindow* window, EngineBridge* bridge, const QString& outputDir,
                               QObject* parent)
    : QObject(parent), m_window(window), m_bridge(bridge), m_dir(outputDir) {
  m_network = new QNetworkAccessManager(this);
  connect(m_bridge, &EngineBridge::modelLoaded, this, &ScreenshotTour::onLoaded);
  connect(
      m_bridge, &EngineBridge::loadFailed, this,
      [this](const QString&, const QString& message) { fail(tr("load failed: %1").arg(message)); });
  connect(m_bridge, &EngineBridge::serverStarted, this, &ScreenshotTour::onServerStarted);
  connect(m_bridge, &EngineBridge::serverFailed, this,
          [this](const QString& message) { fail(tr("server failed: %1").arg(message)); });
  connect(m_window->chat(), &ChatPanel::replyFinished, this, [this] {
    if (sendNextChatMessage()) return;
    m_chatDone = true;
    maybeCapture();
  });
  m_trafficTimer.setSingleShot(true);
  connect(&m_trafficTimer, &QTimer::timeout, this, [this] {
    m_trafficDone = true;
    maybeCapture();
  });
  m_timeout.setSingleShot(true);
  connect(&m_timeout, &QTimer::timeout, this,
          [this] { fail(tr("timed out after %1 s").arg(m_timeout.interval() / 1000)); });
  m_timeout.start(900000);
  if (m_bridge->isLoaded()) QTimer::singleShot(0, this, &ScreenshotTour::onLoaded);
}

void ScreenshotTour::onLoaded() {
  ServeSettings s;
  s.host = QStringLiteral("127.0.0.1");
  s.port = 0;  // any free port
  m_window->serve()->setSettings(s);
  m_window->serve()->start();
}

void ScreenshotTour::onServerStarted(const QString& url) {
  m_url = url;
  for (int i = 0; i < kConcurrency; ++i) sendRequest();
  m_trafficTimer.start(kTrafficMs);
  // A two-turn chat from the Chat page, as a user would type it.
  m_window->showPage(MainWindow::kChatPage);
  m_window->chat()->setSystemPrompt(
      QStringLiteral("You are a concise assistant for programmers. Use Markdown."));
  sendNextChatMessage();
}

bool ScreenshotTour::sendNextChatMessage() {
  static const char* const kMessages[] = {
      "What does a KV cache store in a transformer? Answer in two sentences.",
      "Write a Python function that reverses a string. Put the code in a code block.",
  };
  if (m_chatSent >= static_cast<int>(sizeof(kMessages) / sizeof(kMessages[0]))) return false;
  ChatPanel* chat = m_window->chat();
  chat->input()->setPlainText(QString::fromLatin1(kMessages[m_chatSent++]));
  chat->send();
  return true;
}

void ScreenshotTour::sendRequest() {
  if (m_stopped || m_trafficOff || m_url.isEmpty()) return;
  const int n = m_requestsSent++;
  const QString topic = QString::fromLatin1(kTopics[n % (sizeof(kTopics) / sizeof(kTopics[0]))]);
  // The shared system prompt is what the prefix cache reuses across requests.
  const QJsonArray messages{
      QJsonObject{{"role", "system"},
                  {"content",
                   "You are a concise science writer. Answer in plain prose, at most "
                   "three sentences, for a curious teenager."}},
      QJsonObject{
          {"role", "user"},
          {"content", QStringLiteral("Tell me something surprising about %1.").arg(topic)}}};
  const QJsonObject body{{"model", m_bridge->servedModelName()},
                         {"messages", messages},
                         {"max_tokens", 24 + (n % 5) * 16},
                         {"temperature", 0.7},
                         {"seed", n}};
  QNetworkRequest request(QUrl(m_url + QStringLiteral("/v1/chat/completions")));
  request.setHeader(QNetworkRequest::ContentTypeHeader, QStringLiteral("application/json"));
  QNetworkReply* reply =
      m_network->post(request, QJsonDocument(body).toJson(QJsonDocument::Compact));
  ++m_inFlight;
  connect(reply, &QNetworkReply::finished, this, [this, reply] {
    reply->deleteLater();
    --m_inFlight;
    if (!m_stopped) sendRequest();
  });
}

void ScreenshotTour::maybeCapture() {
  if (m_chatDone && m_trafficDone && !m_capturing) capture();
}

bool ScreenshotTour::grabPage(int page, const QString& name) {
  m_window->showPage(static_cast<MainWindow::Page>(page));
  settle(700);  // two dashboard refreshes, layout settled
  const QString path = QDir(m_dir).filePath(name + QStringLiteral(".png"));
  if (!m_window->grab().save(path)) {
    fail(tr("could not write %1").arg(path));
    return false;
  }
  return true;
}

void ScreenshotTour::capture() {
  m_capturing = true;
  if (!QDir().mkpath(m_dir)) {
    fail(tr("cannot create %1").arg(m_dir));
    return;
  }
  // Traffic keeps running while the pages are captured, so the dashboard shows live curves.
  const bool ok = grabPage(MainWindow::kModelsPage, QStringLiteral("models")) &&
                  grabPage(MainWindow::kChatPage, QStringLiteral("chat")) &&
                  grabPage(MainWindow::kServePage, QStringLiteral("serve")) &&
                  grabPage(MainWindow::kDashboardPage, QStringLiteral("dashboard"));
  if (!ok) return;
  // The same live pages with a dark palette: charts and banners follow a palette switch.
  applyAppearance(Appearance::kDark);
  const bool darkOk = grabPage(MainWindow::kChatPage, QStringLiteral("chat-dark")) &&
                      grabPage(MainWindow::kDashboardPage, QStringLiteral("dashboard-dark"));
  if (!darkOk) return;
  applyAppearance(Appearance::kLight);
  m_trafficOff = true;  // the comparison gets the machine to itself
  if (!captureQuantizeAndCompare()) return;
  m_stopped = true;
  m_timeout.stop();
  emit finished(true, tr("wrote 11 screenshots to %1").arg(m_dir));
}

bool ScreenshotTour::grabWidget(QWidget* widget, const QString& name) {
  settle(500);
  const QString path = QDir(m_dir).filePath(name + QStringLiteral(".png"));
  if (!widget->grab().save(path)) {
    fail(tr("could not write %1").arg(path));
    return false;
  }
  return true;
}

bool ScreenshotTour::captureQuantizeAndCompare() {
  const QString model = m_window->models()->currentPath();
  QuantizeWizard* wizard = m_window->openQuantizeWizard(model);
  if (wizard == nullptr || !waitFor(wizard, &QuantizeWizard::candidatesShown, 120000)) {
    fail(tr("the quantization wizard did not plan its candidates"));
    return false;
  }
  // Step 2 (calibration) exists for GPTQ and AWQ only: shown with GPTQ chosen, then back.
  wizard->goalPage()->setGoal(QuantGoal::kSpecific);
  wizard->goalPage()->selectScheme(QStringLiteral("gptq"));
  wizard->next();
  if (wizard->currentId() != QuantizeWizard::kCalibrationPage) {
    fail(tr("the wizard did not offer its calibration step for GPTQ"));
    return false;
  }
  if (!grabWidget(wizard, QStringLiteral("quantize-calibration"))) return false;
  wizard->back();
  wizard->goalPage()->setGoal(QuantGoal::kBestQuality);
  if (!grabWidget(wizard, QStringLiteral("quantize-goal"))) return false;
  wizard->next();
  const QString q8 = m_outputs.filePath(QStringLiteral("SmolLM2-135M-Instruct-Q8_0.gguf"));
  wizard->outputPage()->setOutputPath(q8);
  wizard->outputPage()->setEvaluation(true, 256, 4);  // a short measurement for the tour
  if (!grabWidget(wizard, QStringLiteral("quantize-output"))) return false;
  QuantizeTask* task = m_window->quantizeTask();
  wizard->next();
  waitFor(task, &QuantizeTask::progress, 60000);
  if (!grabWidget(wizard, QStringLiteral("quantize-run"))) return false;
  if (task->isRunning()) waitFor(task, &QuantizeTask::finished, 300000);
  if (wizard->currentId() != QuantizeWizard::kFinishedPage) {
    fail(tr("the Q8_0 quantization did not finish"));
    return false;
  }
  if (!grabWidget(wizard, QStringLiteral("quantize-done"))) return false;
  wizard->close();
  // A third variant, 4-bit, straight from the task.
  QuantizeSpec q4;
  q4.model = model;
  q4.scheme = QStringLiteral("q4_0");
  q4.output = m_outputs.filePath(QStringLiteral("SmolLM2-135M-Instruct-Q4_0.gguf"));
  if (!task->start(q4) || !waitFor(task, &QuantizeTask::finished, 300000)) {
    fail(tr("the Q4_0 quantization did not finish"));
    return false;
  }
  ComparePanel* compare = m_window->compare();
  compare->setModels({model, q8, q4.output});
  compare->setConcurrency(QStringLiteral("1, 4, 16"));
  compare->setLengths(64, 32);
  m_window->showPage(MainWindow::kComparePage);
  if (!compare->run() || !waitFor(compare, &ComparePanel::comparisonFinished, 600000)) {
    fail(tr("the comparison did not finish"));
    return false;
  }
  return grabPage(MainWindow::kComparePage, QStringLiteral("compare"));
}

void ScreenshotTour::fail(const QString& message) {
  if (m_stopped) return;
  m_stopped = true;
  m_timeout.stop();
  emit finished(false, message);
}

}  // namespace lathe::ui
