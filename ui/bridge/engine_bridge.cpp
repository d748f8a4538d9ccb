#include "ui/bridge/engine_bridge.h"

#include <QMetaObject>

#include <map>

#include "engine/model/model_loader.h"
#include "ui/bridge/engine_worker.h"
#include "ui/bridge/model_summary.h"

namespace lathe::ui {

namespace {
// Facts of inspected models by path (GUI thread only), for planMemory().
std::map<QString, ModelFacts>& factsCache() {
  static std::map<QString, ModelFacts> cache;
  return cache;
}
}  // namespace

EngineBridge::EngineBridge(QObject* parent) : QObject(parent) {
  qRegisterMetaType<ModelSummary>();
  qRegisterMetaType<GenerationStats>();
  qRegisterMetaType<ChatToolReply>();
  qRegisterMetaType<RequestLogEntry>();
  qRegisterMetaType<MetricsSample>();
  qRegisterMetaType<MemoryPlan>();
  m_device = detectDevice();
  m_inspectPool.setMaxThreadCount(1);
  m_thread.setObjectName(QStringLiteral("lathe-engine-bridge"));
  m_worker = new EngineWorker(this);
  m_worker->moveToThread(&m_thread);
  m_thread.start();
}

EngineBridge::~EngineBridge() {
  // Stop the server and the engine on the worker thread (in-flight streams end with "abort"),
  // then end the thread. A load in progress stops at its next stage. Posted deliveries to this
  // object die with it.
  m_cancelLoad = true;
  QMetaObject::invokeMethod(
      m_worker, [w = m_worker] { w->shutdown(); }, Qt::BlockingQueuedConnection);
  m_thread.quit();
  m_thread.wait();
  delete m_worker;
  m_inspectPool.waitForDone();
}

void EngineBridge::setState(State state) {
  if (m_state == state) return;
  m_state = state;
  emit stateChanged(state);
}

QString EngineBridge::defaultModelPath(QString* error) {
  auto resolved = resolve_model_path("");
  if (!resolved.is_ok()) {
    if (error) *error = QString::fromStdString(resolved.status().message());
    return {};
  }
  return QString::fromStdString(resolved.value());
}

MemoryPlan EngineBridge::planMemory(const ModelSummary& model, const LoadSettings& settings) const {
  const auto it = factsCache().find(model.path);
  if (it == factsCache().end()) return MemoryPlan{};
  return planMemoryFor(it->second, settings, m_device);
}

void EngineBridge::inspectModel(const QString& path) {
  const quint64 serial = ++m_inspectSerial;
  m_inspectPool.start([this, path, serial] {
    lowerCurrentThreadPriority();
    auto report = inspect_model(path.toStdString(), ReportOptions{});
    if (!report.is_ok()) {
      QMetaObject::invokeMethod(
          this,
          [this, path, serial, msg = QString::fromStdString(report.status().message())] {
            if (serial == m_inspectSerial.load()) emit inspectFailed(path, msg);
          },
          Qt::QueuedConnection);
      return;
    }
    ModelSummary summary = summarizeReport(report.value());
    summary.path = path;  // as the caller named it
    ModelFacts facts = factsFromReport(report.value());
    QMetaObject::invokeMethod(
        this,
        [this, summary, facts, serial] {
          factsCache()[summary.path] = facts;
          if (serial == m_inspectSerial.load()) emit modelInspected(summary);
        },
        Qt::QueuedConnection);
  });
}

void EngineBridge::loadModel(const QString& path, const LoadSettings& settings) {
  if (m_state == State::kLoading || m_state == State::kUnloading) return;
  m_cancelLoad = false;
  setState(State::kLoading);
  emit loadStarted(path);
  QMetaObject::invokeMethod(
      m_worker,
      [w = m_worker, path, settings, threads = m_cpuThreads] { w->load(path, settings, threads); },
      Qt::QueuedConnection);
}

void EngineBridge::cancelLoad() {
  if (m_state == State::kLoading) m_cancelLoad = true;
}

void EngineBridge::unloadModel() {
  if (m_state != State::kLoaded) return;
  setState(State::kUnloading);
  QMetaObject::invokeMethod(
      m_worker, [w = m_worker] { w->unload(); }, Qt::QueuedConnection);
}

quint64 EngineBridge::generate(const GenerationRequest& request) {
  const quint64 ticket = ++m_nextTicket;
  QMetaObject::invokeMethod(
      m_worker, [w = m_worker, ticket, request] { w->generate(ticket, request); },
      Qt::QueuedConnection);
  return ticket;
}

void EngineBridge::cancelGeneration(quint64 ticket) {
  QMetaObject::invokeMethod(
      m_worker, [w = m_worker, ticket] { w->cancel(ticket); }, Qt::QueuedConnection);
}

void EngineBridge::startServer(const ServeSettings& settings) {
  QMetaObject::invokeMethod(
      m_worker, [w = m_worker, settings] { w->startServer(settings); }, Qt::QueuedConnection);
}

void EngineBridge::stopServer() {
  QMetaObject::invokeMethod(
      m_worker, [w = m_worker] { w->stopServer(); }, Qt::QueuedConnection);
}

}  // namespace lathe::ui
