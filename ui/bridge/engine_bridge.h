// EngineBridge: the border between Lathe Studio's widgets and the engine. It owns the engine (and
// the OpenAI-compatible server while it runs) on a worker thread; every engine callback (load
// progress, stream events, server request log, metrics polls) is re-posted to the GUI thread as a
// queued signal. Widgets talk only to this class and to the plain structs of bridge_types.h; no
// method blocks on the engine.
//
// Lifetime: one model at a time. loadModel() while a model is loaded unloads it first. The
// destructor stops the server, aborts every request (their streams finish with reason "abort"),
// shuts the engine down and joins the threads.
#pragma once

#include <QObject>
#include <QString>
#include <QThread>
#include <QThreadPool>

#include <atomic>
#include <memory>

#include "ui/bridge/bridge_types.h"
#include "ui/settings/load_settings.h"

namespace lathe::ui {

class EngineWorker;

class EngineBridge : public QObject {
  Q_OBJECT
 public:
  enum class State { kEmpty, kLoading, kLoaded, kUnloading };
  Q_ENUM(State)

  explicit EngineBridge(QObject* parent = nullptr);
  ~EngineBridge() override;

  State state() const { return m_state; }
  bool isLoaded() const { return m_state == State::kLoaded; }
  const ModelSummary& loadedModel() const { return m_loaded; }  // valid when loaded
  QString kvPlanSummary() const { return m_kvPlan; }            // "KV cache: N blocks × 16 …"
  QString loadedDevice() const { return m_loadedDevice; }       // "cpu" / "cuda:0 (NVIDIA H200)"
  QString servedModelName() const { return m_servedName; }      // the API's model id
  // Set when the device was chosen for the user, e.g. "no usable GPU: running on the CPU (...)".
  QString loadNotice() const { return m_loadNotice; }
  const DeviceInfo& device() const { return m_device; }  // detected at construction

  // The memory plan for a model under `settings` on the detected device. Pure arithmetic (safe on
  // the GUI thread).
  MemoryPlan planMemory(const ModelSummary& model, const LoadSettings& settings) const;

  // Threads of the CPU backend for the next load; 0 = all cores but one (the window keeps one).
  void setCpuThreads(int threads) { m_cpuThreads = threads; }
  // The default model (SmolLM2-135M-Instruct Q4_1) when it is in the model cache; otherwise an
  // empty path and *error says how to fetch it.
  static QString defaultModelPath(QString* error = nullptr);

  // --- Models --------------------------------------------------------------------------------
  // Reads a model's description without loading it for inference. Answers with modelInspected or
  // inspectFailed (message names the file and the cause). Runs on a pool thread.
  void inspectModel(const QString& path);
  // Loads a model for inference with `settings`. Emits loadStarted, loadProgress…, then exactly one
  // of modelLoaded, loadFailed or loadCancelled.
  void loadModel(const QString& path, const LoadSettings& settings);
  // Asks a running load to stop at its next progress report.
  void cancelLoad();
  // Stops the server, aborts running requests and frees the model. Emits modelUnloaded.
  void unloadModel();

  // --- Generation ------------------------------------------------------------------------------
  // Submits a chat generation and returns its ticket (> 0) at once. Text arrives as
  // generationDelta(ticket, …) (several tokens coalesced per delivery); generationFinished comes
  // exactly once, also for failures (stats.finishReason "error" and stats.error set).
  quint64 generate(const GenerationRequest& request);
  void cancelGeneration(quint64 ticket);

  // --- Server ----------------------------------------------------------------------------------
  // Starts the OpenAI-compatible server on the loaded model. Emits serverStarted(url) or
  // serverFailed(message). Finished API requests arrive as requestLogged.
  void startServer(const ServeSettings& settings);
  void stopServer();
  bool isServing() const { return !m_serverUrl.isEmpty(); }
  QString serverUrl() const { return m_serverUrl; }

 signals:
  void stateChanged(lathe::ui::EngineBridge::State state);
  void modelInspected(const lathe::ui::ModelSummary& model);
  void inspectFailed(const QString& path, const QString& message);
  void loadStarted(const QString& path);
  void loadProgress(double fraction, const QString& stage);
  void modelLoaded(const lathe::ui::ModelSummary& model);
  void loadFailed(const QString& path, const QString& message);
  void loadCancelled(const QString& path);
  void modelUnloaded();
  void generationDelta(quint64 ticket, const QString& text);
  void generationFinished(quint64 ticket, const lathe::ui::GenerationStats& stats);
  // Requests with tools: the reply parsed into content and calls, just before generationFinished.
  // Deltas carry only the text that surely is content.
  void generationToolReply(quint64 ticket, const lathe::ui::ChatToolReply& reply);
  void metricsSampled(const lathe::ui::MetricsSample& sample);
  void serverStarted(const QString& url);
  void serverFailed(const QString& message);
  void serverStopped();
  void requestLogged(const lathe::ui::RequestLogEntry& entry);

 private:
  friend class EngineWorker;
  void setState(State state);

  State m_state = State::kEmpty;
  ModelSummary m_loaded;
  QString m_kvPlan;
  QString m_loadedDevice;
  QString m_servedName;
  QString m_loadNotice;
  QString m_serverUrl;
  DeviceInfo m_device;
  int m_cpuThreads = 0;
  std::atomic<bool> m_cancelLoad{false};
  std::atomic<quint64> m_nextTicket{0};
  std::atomic<quint64> m_inspectSerial{0};  // only the newest inspection is reported
  QThread m_thread;
  QThreadPool m_inspectPool;
  EngineWorker* m_worker = nullptr;  // lives on m_thread
};

}  // namespace lathe::ui

Q_DECLARE_METATYPE(lathe::ui::MemoryPlan)
