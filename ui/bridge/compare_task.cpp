#include "ui/bridge/compare_task.h"

#include <QFileInfo>
#include <QMetaObject>

#include <algorithm>
#include <chrono>
#include <thread>

#include "engine/bench/load_generator.h"
#include "engine/bench/offline_bench.h"
#include "engine/bench/serve_bench_dataset.h"
#include "engine/bench/serve_bench_metrics.h"
#include "engine/model/model_report.h"
#include "engine/server/api_server.h"
#include "ui/bridge/engine_worker.h"
#include "ui/bridge/model_summary.h"
#include "ui/bridge/quality_eval.h"

namespace lathe::ui {

int promptsForLevel(const CompareSpec& spec, int level) {
  return spec.promptsPerLevel > 0 ? spec.promptsPerLevel : std::max(4, 2 * level);
}

CompareTask::CompareTask(QObject* parent) : QObject(parent) {
  qRegisterMetaType<CompareVariant>();
  qRegisterMetaType<CompareProgressInfo>();
  m_pool.setMaxThreadCount(1);
}

CompareTask::~CompareTask() {
  m_cancel = true;
  m_pool.waitForDone();
}

bool CompareTask::start(const CompareSpec& spec, const LoadSettings& settings) {
  if (m_running) return false;
  m_running = true;
  m_cancel = false;
  m_pool.start([this, spec, settings] { run(spec, settings); });
  return true;
}

void CompareTask::cancel() {
  if (m_running) m_cancel = true;
}

void CompareTask::report(const CompareSpec& spec, int variant, double within,
                         const QString& stage) {
  CompareProgressInfo p;
  p.variant = variant;
  p.numVariants = static_cast<int>(spec.models.size());
  p.stage = stage;
  p.fraction = (variant + std::clamp(within, 0.0, 1.0)) / std::max(1, p.numVariants);
  QMetaObject::invokeMethod(
      this, [this, p] { emit progress(p); }, Qt::QueuedConnection);
}

void CompareTask::run(const CompareSpec& spec, const LoadSettings& settings) {
  lowerCurrentThreadPriority();  // the engine's threads inherit it
  for (int i = 0; i < spec.models.size() && !m_cancel; ++i) {
    CompareVariant v = measure(spec, settings, i);
    if (m_cancel) break;
    if (i > 0 && !spec.evalText.isEmpty() && v.error.isEmpty()) {
      report(spec, i, 1.0, tr("quality against %1").arg(QFileInfo(spec.models[0]).fileName()));
      v.quality = measureQuality(
          {v.path, spec.models[0], spec.evalText, spec.evalContext, spec.evalWindows},
          [](const EvalProgress&) {}, &m_cancel);
      if (m_cancel) break;
    }
    QMetaObject::invokeMethod(
        this, [this, i, v] { emit variantMeasured(i, v); }, Qt::QueuedConnection);
  }
  QMetaObject::invokeMethod(
      this,
      [this, cancelled = m_cancel.load()] {
        m_running = false;
        emit finished(cancelled);
      },
      Qt::QueuedConnection);
}

CompareVariant CompareTask::measure(const CompareSpec& spec, const LoadSettings& settings,
                                    int index) {
  CompareVariant v;
  v.path = spec.models[index];
  v.name = QFileInfo(v.path).fileName();
  const double steps = 2.0 + static_cast<double>(spec.concurrency.size());
  report(spec, index, 0.0, tr("loading %1").arg(v.name));
  auto report_ok = inspect_model(v.path.toStdString(), ReportOptions{});
  if (!report_ok.is_ok()) {
    v.error = QString::fromStdString(report_ok.status().message());
    return v;
  }
  const ModelSummary summary = summarizeReport(report_ok.value());
  v.dtype = summary.dtype;
  v.weightBytes = summary.fileBytes;
  v.bitsPerWeight = summary.numParameters > 0
                        ? static_cast<double>(summary.fileBytes) * 8.0 / summary.numParameters
                        : 0.0;
  LoadSettings s = settings;
  s.maxModelLen = spec.maxModelLen;
  auto created = Engine::create(toEngineConfig(v.path, s, spec.cpuThreads));
  if (!created.is_ok()) {
    v.error = QString::fromStdString(created.status().message());
    return v;
  }
  std::unique_ptr<Engine> engine = std::move(created).value();
  v.kvCacheBytes = engine->kv_plan().total_bytes;
  v.device = QString::fromStdString(engine->kv_plan().device_name);
  if (m_cancel) return v;

  report(spec, index, 1.0 / steps, tr("%1: batch-1 latency").arg(v.name));
  LatencyOptions lo;
  lo.batch_size = 1;
  lo.input_len = spec.inputLen;
  lo.output_len = spec.outputLen;
  lo.num_iters_warmup = 1;
  lo.num_iters = std::max(1, spec.latencyIters);
  auto latency = run_latency_benchmark(*engine, lo);
  if (!latency.is_ok()) {
    v.error = QString::fromStdString(latency.status().message());
    return v;
  }
  v.batch1TokensPerSec = latency->decode_tokens_per_s;
  v.batch1LatencyMs = 1000.0 * latency->latency_s.mean;
  v.ttftMs = 1000.0 * latency->ttft_s.p50;
  if (latency->ttft_s.p50 > 0) v.prefillTokensPerSec = spec.inputLen / latency->ttft_s.p50;

  ServerConfig sc;
  sc.port = 0;
  sc.log_requests = false;
  sc.shutdown_grace_s = 0.5;
  auto server = ApiServer::start(*engine, sc);
  if (!server.is_ok()) {
    v.error = QString::fromStdString(server.status().message());
    return v;
  }
  auto url = parse_url(server.value()->url());
  // Cancel during a level: stopping the server aborts the requests in flight, so run_load returns.
  std::atomic<bool> sweepDone{false};
  ApiServer* srv = server.value().get();
  std::thread watcher([this, srv, &sweepDone] {
    while (!sweepDone && !m_cancel) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (m_cancel) srv->stop(std::chrono::milliseconds(0));
  });
  for (int l = 0; l < spec.concurrency.size() && !m_cancel && url.is_ok(); ++l) {
    const int level = spec.concurrency[l];
    report(spec, index, (2.0 + l) / steps, tr("%1: concurrency %2").arg(v.name).arg(level));
    DatasetOptions d;
    d.num_prompts = promptsForLevel(spec, level);
    d.input_len = spec.inputLen;
    d.output_len = spec.outputLen;
    d.token_ids = true;
    d.vocab_size = engine->model().config.vocab_size;
    d.seed = static_cast<uint64_t>(level);
    auto prompts = make_bench_dataset(d);
    if (!prompts.is_ok()) {
      v.error = QString::fromStdString(prompts.status().message());
      break;
    }
    LoadGenOptions o;
    o.base_url = url.value();
    o.model = server.value()->model_name();
    o.max_concurrency = level;
    o.ignore_eos = true;
    auto load = run_load(o, prompts.value());
    if (!load.is_ok()) {
      v.error = QString::fromStdString(load.status().message());
      break;
    }
    const ServeBenchMetrics m = compute_serve_metrics(load.value());
    ComparePoint p;
    p.concurrency = level;
    p.completed = m.completed;
    p.failed = m.failed;
    p.outputTokensPerSec = m.output_throughput;
    p.requestsPerSec = m.request_throughput;
    p.ttftP50Ms = m.ttft.median_ms;
    p.ttftP99Ms = m.ttft.p99_ms;
    p.itlP50Ms = m.itl.median_ms;
    p.itlP99Ms = m.itl.p99_ms;
    v.sweep.push_back(p);
    if (m.failed > 0 && !m.errors.empty() && v.error.isEmpty())
      v.error = tr("%1 requests failed at concurrency %2: %3")
                    .arg(m.failed)
                    .arg(level)
                    .arg(QString::fromStdString(m.errors.front()));
  }
  sweepDone = true;
  watcher.join();
  server.value()->stop(std::chrono::milliseconds(500));
  engine->shutdown();
  return v;
}

}  // namespace lathe::ui
