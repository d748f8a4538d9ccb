// The EngineBridge's worker: lives on the bridge's worker thread and owns the engine and the API
// server. Its methods run only on that thread (the bridge invokes them with queued calls); results
// go back to the bridge as functors posted to the GUI thread. Internal to ui/bridge.
#pragma once

#include <QObject>
#include <QString>

#include <memory>
#include <mutex>
#include <unordered_map>

#include "ui/bridge/bridge_types.h"
#include "ui/settings/load_settings.h"

class QTimer;

namespace lathe {
class ApiServer;
class Engine;
class InProcessChat;
}  // namespace lathe

namespace lathe::ui {

class EngineBridge;

// The engine's threads (the core loop, the CPU backend's workers, the server's connection
// threads) run at this nice value, above the GUI thread's 0: when the CPU backend saturates every
// core, the window still gets the CPU first and stays responsive.
constexpr int kEngineNice = 5;
// Applies kEngineNice to the calling thread (Linux; elsewhere a no-op). Threads it creates later
// inherit the value.
void lowerCurrentThreadPriority();

class EngineWorker : public QObject {
  Q_OBJECT
 public:
  explicit EngineWorker(EngineBridge* bridge);
  ~EngineWorker() override;

  void load(const QString& path, const LoadSettings& settings, int cpuThreads);
  void unload();
  void generate(quint64 ticket, const GenerationRequest& request);
  void cancel(quint64 ticket);
  void startServer(const ServeSettings& settings);
  void stopServer();
  // Stops the server and the engine (streams end with "abort"). Called before the thread ends.
  void shutdown();

 private:
  // Runs `fn` on the GUI thread (queued to the bridge).
  template <typename Fn>
  void post(Fn&& fn);
  void pollMetrics();
  void unloadInternal(bool announce);

  EngineBridge* m_bridge;
  std::unique_ptr<lathe::Engine> m_engine;
  std::unique_ptr<lathe::ApiServer> m_server;
  // The server's request path for chats with structured output or tools (while m_engine lives).
  std::unique_ptr<lathe::InProcessChat> m_chat;
  QTimer* m_metricsTimer = nullptr;
  uint64_t m_ttftCursor = 0;
  uint64_t m_finishedCursor = 0;
  // ticket -> engine request id of running chat generations; the finish callback (engine thread)
  // removes its entry, so access is locked.
  std::mutex m_ticketsMutex;
  std::unordered_map<quint64, uint64_t> m_tickets;
};

}  // namespace lathe::ui
