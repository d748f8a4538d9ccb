#include "ui/bridge/engine_worker.h"

#include <QMetaObject>
#include <QTimer>

#include <chrono>
#include <optional>

#ifdef __linux__
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "engine/runtime/runner_factory.h"
#include "engine/server/api_server.h"
#include "engine/server/in_process_chat.h"
#include "engine/server/tool_reply.h"
#include "ui/bridge/chat_request.h"
#include "ui/bridge/engine_bridge.h"
#include "ui/bridge/model_summary.h"

namespace lathe::ui {

namespace {

// Text of a stream waiting to be delivered to the GUI thread. The engine thread appends; the first
// append after a delivery posts one delivery, so the GUI thread gets at most one queued event per
// stream at a time however fast tokens come.
struct PendingStream {
  std::mutex mutex;
  std::string text;
  bool deliveryPosted = false;
  std::optional<ToolReply> tools;  // requests with tools: what may be a call is held back
  std::string content;             // requests with tools: the content passed on so far
};

bool needsServerPath(const GenerationRequest& r) {
  if (!r.output.isPlain()) return true;
  for (const ChatTurn& t : r.messages)
    if (!t.toolCalls.isEmpty() || t.role == QLatin1String("tool")) return true;
  return false;
}

ChatToolReply toolReplyOf(std::string content, const ParsedReply& parsed) {
  ChatToolReply reply;
  reply.content = QString::fromStdString(content + parsed.content).trimmed();
  for (const ToolCall& c : parsed.calls)
    reply.calls.push_back({QString::fromStdString(c.id), QString::fromStdString(c.name),
                           QString::fromStdString(c.arguments)});
  return reply;
}

// "CPU (1 threads, avx2)", "cuda:0 NVIDIA H200": what the engine reports, else the device kind.
QString deviceLabel(const Engine& engine) {
  const EngineConfig& c = engine.config();
  const std::string& name = engine.kv_plan().device_name;
  QString label = c.device.device == DeviceKind::kCuda
                      ? QStringLiteral("cuda:%1 ").arg(c.device.cuda_device)
                      : QString();
  label += name.empty() ? QString::fromLatin1(device_kind_name(c.device.device))
                        : QString::fromStdString(name);
  return label.trimmed();
}

}  // namespace

void lowerCurrentThreadPriority() {
#ifdef __linux__
  // Nice values are per thread on Linux and inherited by threads created afterwards.
  const auto tid = static_cast<id_t>(syscall(SYS_gettid));
  const int current = getpriority(PRIO_PROCESS, tid);
  if (current < kEngineNice) setpriority(PRIO_PROCESS, tid, kEngineNice);
#endif
}

EngineWorker::EngineWorker(EngineBridge* bridge) : m_bridge(bridge) {
  m_metricsTimer = new QTimer(this);
  m_metricsTimer->setInterval(100);
  connect(m_metricsTimer, &QTimer::timeout, this, &EngineWorker::pollMetrics);
}

EngineWorker::~EngineWorker() {
  shutdown();
}

template <typename Fn>
void EngineWorker::post(Fn&& fn) {
  QMetaObject::invokeMethod(m_bridge, std::forward<Fn>(fn), Qt::QueuedConnection);
}

void EngineWorker::load(const QString& path, const LoadSettings& settings, int cpuThreads) {
  lowerCurrentThreadPriority();  // before the engine's threads exist, so they inherit it
  if (m_engine) unloadInternal(true);
  const EngineConfig config = toEngineConfig(path, settings, cpuThreads);
  const Status valid = validate_engine_config(config);
  if (!valid.is_ok()) {
    post([b = m_bridge, path, msg = QString::fromStdString(valid.message())] {
      b->setState(EngineBridge::State::kEmpty);
      emit b->loadFailed(path, msg);
    });
    return;
  }
  // Progress reports are throttled to whole percents and stage changes.
  int lastPermille = -1;
  std::string lastStage;
  auto progress = [this, &lastPermille, &lastStage](float fraction, const std::string& stage) {
    const int permille = static_cast<int>(fraction * 1000.0f);
    if (permille / 10 != lastPermille / 10 || stage != lastStage) {
      lastPermille = permille;
      lastStage = stage;
      post([b = m_bridge, fraction, s = QString::fromStdString(stage)] {
        emit b->loadProgress(static_cast<double>(fraction), s);
      });
    }
    return !m_bridge->m_cancelLoad.load();
  };
  // --device auto without a usable GPU runs on the CPU: say so instead of falling back silently.
  const auto selection = select_device(config.device);
  QString notice = selection.is_ok() ? QString::fromStdString(selection.value().notice) : QString();
  if (!notice.isEmpty()) notice[0] = notice[0].toUpper();
  auto created = Engine::create(config, progress);
  if (!created.is_ok()) {
    const Status st = created.status();
    if (st.code() == ErrorCode::kCancelled || m_bridge->m_cancelLoad.load()) {
      post([b = m_bridge, path] {
        b->setState(EngineBridge::State::kEmpty);
        emit b->loadCancelled(path);
      });
    } else {
      post([b = m_bridge, path, msg = QString::fromStdString(st.message())] {
        b->setState(EngineBridge::State::kEmpty);
        emit b->loadFailed(path, msg);
      });
    }
    return;
  }
  m_engine = std::move(created).value();
  m_chat = std::make_unique<InProcessChat>(*m_engine);
  ModelSummary summary = summarizeReport(build_model_report(m_engine->model(), ReportOptions{}));
  summary.path = path;
  const QString kv = QString::fromStdString(m_engine->kv_plan().summary());
  const QString device = deviceLabel(*m_engine);
  m_ttftCursor = 0;
  m_finishedCursor = 0;
  m_metricsTimer->start();
  post([b = m_bridge, summary, kv, device, notice] {
    b->m_loaded = summary;
    b->m_loadNotice = notice;
    b->m_kvPlan = kv;
    b->m_loadedDevice = device;
    b->m_servedName = summary.name;
    b->setState(EngineBridge::State::kLoaded);
    emit b->modelLoaded(summary);
  });
}

void EngineWorker::unload() {
  unloadInternal(true);
}

void EngineWorker::unloadInternal(bool announce) {
  const bool wasServing = m_server != nullptr;
  if (m_server) {
    m_server->stop(std::chrono::milliseconds(2000));
    m_server.reset();
  }
  if (m_metricsTimer->isActive()) m_metricsTimer->stop();
  if (m_engine) {
    m_engine->shutdown();  // every open stream ends with reason "abort"
    m_chat.reset();
    m_engine.reset();
  }
  if (!announce) return;
  post([b = m_bridge, wasServing] {
    b->m_loaded = ModelSummary{};
    b->m_kvPlan.clear();
    b->m_loadedDevice.clear();
    if (wasServing) {
      b->m_serverUrl.clear();
      emit b->serverStopped();
    }
    // A reload keeps the loading state; a plain unload ends empty.
    if (b->m_state != EngineBridge::State::kLoading) b->setState(EngineBridge::State::kEmpty);
    emit b->modelUnloaded();
  });
}

void EngineWorker::generate(quint64 ticket, const GenerationRequest& request) {
  auto fail = [this, ticket](const QString& message) {
    GenerationStats stats;
    stats.finishReason = QStringLiteral("error");
    stats.error = message;
    post([b = m_bridge, ticket, stats] { emit b->generationFinished(ticket, stats); });
  };
  if (!m_engine) {
    fail(tr("No model is loaded."));
    return;
  }
  RequestSpec spec;
  std::optional<ToolReply> tools;
  if (needsServerPath(request)) {
    // Structured output and tools: the server's own request path, so the same schema or tool list
    // gives the same grammar, the same prompt and the same errors.
    Result<OpenAiRequest> prepared = m_chat->prepare(chatRequestBody(request).toStdString());
    if (!prepared.is_ok()) {
      fail(QString::fromStdString(prepared.status().message()));
      return;
    }
    if (prepared->uses_tools()) tools.emplace(*prepared, m_chat->tool_syntax());
    spec = std::move(prepared->spec);
  } else {
    for (const ChatTurn& t : request.messages)
      spec.messages.push_back({t.role.toStdString(), t.content.toStdString()});
  }
  const SamplingSettings& s = request.sampling;
  spec.sampling.temperature = static_cast<float>(s.temperature);
  spec.sampling.top_p = static_cast<float>(s.topP);
  spec.sampling.top_k = s.topK;
  spec.sampling.min_p = static_cast<float>(s.minP);
  spec.sampling.repetition_penalty = static_cast<float>(s.repetitionPenalty);
  spec.sampling.max_tokens = s.maxTokens;
  if (s.seed) spec.sampling.seed = *s.seed;
  spec.client_id = QStringLiteral("studio-%1").arg(ticket).toStdString();

  auto pending = std::make_shared<PendingStream>();
  pending->tools = std::move(tools);
  EngineBridge* bridge = m_bridge;
  // Delivers the buffered text (GUI thread).
  auto deliver = [bridge, ticket, pending] {
    std::string text;
    {
      std::lock_guard<std::mutex> lock(pending->mutex);
      text.swap(pending->text);
      pending->deliveryPosted = false;
    }
    if (!text.empty()) emit bridge->generationDelta(ticket, QString::fromStdString(text));
  };
  auto onEvent = [this, bridge, ticket, pending, deliver](const StreamEvent& ev) {
    bool postDelivery = false;
    std::optional<ChatToolReply> reply;
    {
      std::lock_guard<std::mutex> lock(pending->mutex);
      if (pending->tools) {
        const std::string content = pending->tools->feed(ev.text);
        pending->text += content;
        pending->content += content;
        if (ev.finished) reply = toolReplyOf(pending->content, pending->tools->finish());
      } else {
        pending->text += ev.text;
      }
      if (!ev.finished && !pending->text.empty() && !pending->deliveryPosted) {
        pending->deliveryPosted = true;
        postDelivery = true;
      }
    }
    if (postDelivery) QMetaObject::invokeMethod(bridge, deliver, Qt::QueuedConnection);
    if (ev.finished) {
      GenerationStats stats = statsFromEvent(ev);
      if (reply && !reply->calls.isEmpty() && stats.finishReason == QLatin1String("stop"))
        stats.finishReason = QStringLiteral("tool_calls");
      {
        std::lock_guard<std::mutex> lock(m_ticketsMutex);
        m_tickets.erase(ticket);
      }
      QMetaObject::invokeMethod(
          bridge,
          [bridge, ticket, stats, deliver, reply] {
            deliver();  // the last text before the finish
            if (reply) emit bridge->generationToolReply(ticket, *reply);
            emit bridge->generationFinished(ticket, stats);
          },
          Qt::QueuedConnection);
    }
  };
  // The entry exists before submit so that a finish racing with it can erase it; the engine's id
  // is filled in afterwards unless the request already finished. No lock is held across submit().
  {
    std::lock_guard<std::mutex> lock(m_ticketsMutex);
    m_tickets[ticket] = 0;
  }
  auto id = m_engine->submit(spec, onEvent);
  std::lock_guard<std::mutex> lock(m_ticketsMutex);
  if (!id.is_ok()) {
    m_tickets.erase(ticket);
    fail(QString::fromStdString(id.status().message()));
    return;
  }
  auto it = m_tickets.find(ticket);
  if (it != m_tickets.end()) it->second = id.value();
}

void EngineWorker::cancel(quint64 ticket) {
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(m_ticketsMutex);
    auto it = m_tickets.find(ticket);
    if (it == m_tickets.end()) return;
    id = it->second;
  }
  if (m_engine && id != 0) m_engine->abort(id);
}

void EngineWorker::startServer(const ServeSettings& s) {
  if (!m_engine) {
    post([b = m_bridge] { emit b->serverFailed(tr("No model is loaded.")); });
    return;
  }
  if (m_server) return;
  ServerConfig config;
  config.host = s.host.toStdString();
  config.port = s.port;
  config.api_key = s.apiKey.toStdString();
  config.shutdown_grace_s = 2.0;
  auto started = ApiServer::start(*m_engine, config);
  if (!started.is_ok()) {
    post([b = m_bridge, msg = QString::fromStdString(started.status().message())] {
      emit b->serverFailed(msg);
    });
    return;
  }
  m_server = std::move(started).value();
  EngineBridge* bridge = m_bridge;
  m_server->set_request_log_callback([bridge](const lathe::RequestLogEntry& e) {
    QMetaObject::invokeMethod(
        bridge, [bridge, entry = toLogEntry(e)] { emit bridge->requestLogged(entry); },
        Qt::QueuedConnection);
  });
  post([b = m_bridge, url = QString::fromStdString(m_server->url()),
        name = QString::fromStdString(m_server->model_name())] {
    b->m_serverUrl = url;
    b->m_servedName = name;
    emit b->serverStarted(url);
  });
}

void EngineWorker::stopServer() {
  if (!m_server) return;
  m_server->set_request_log_callback(nullptr);
  m_server->stop(std::chrono::milliseconds(2000));
  m_server.reset();
  post([b = m_bridge] {
    b->m_serverUrl.clear();
    emit b->serverStopped();
  });
}

void EngineWorker::pollMetrics() {
  if (!m_engine) return;
  // Cursors make the snapshot copy only the points that are new since the last poll.
  const MetricsSnapshot snap = m_engine->metrics().snapshot(m_ttftCursor, m_finishedCursor);
  m_ttftCursor = snap.ttft_cursor;
  m_finishedCursor = snap.finished_cursor;
  post([b = m_bridge, sample = toMetricsSample(snap)] { emit b->metricsSampled(sample); });
}

void EngineWorker::shutdown() {
  unloadInternal(false);
}

}  // namespace lathe::ui
