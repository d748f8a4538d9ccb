#include "ui/bridge/quantize_task.h"

#include <QDir>
#include <QFileInfo>
#include <QMetaObject>
#include <QThread>

#include <chrono>
#include <fstream>

#include <unistd.h>

#include "engine/eval/evaluate.h"
#include "engine/quant/calibration.h"
#include "engine/quant/quantize_model.h"
#include "ui/bridge/engine_worker.h"
#include "ui/bridge/quality_eval.h"
#include "ui/bridge/quantize_plan.h"
#include "ui/compare/compare_run_store.h"
#include "ui/quantize/measured_figures.h"
#include "ui/quantize/quant_output_log.h"

namespace lathe::ui {

qint64 residentMemoryBytes() {
  std::ifstream statm("/proc/self/statm");
  long long pages = 0, resident = 0;
  if (!(statm >> pages >> resident)) return 0;
  return static_cast<qint64>(resident) * static_cast<qint64>(sysconf(_SC_PAGESIZE));
}

QString defaultEvalTextPath() {
  // The text cache holds calibration.txt and canterbury/ side by side.
  const QDir dir = QFileInfo(QString::fromStdString(default_calibration_path())).dir();
  const QString path = dir.filePath(QStringLiteral("canterbury/alice29.txt"));
  return QFileInfo::exists(path) ? path : QString();
}

QuantizeTask::QuantizeTask(QObject* parent) : QObject(parent) {
  qRegisterMetaType<QuantCandidates>();
  qRegisterMetaType<QuantizeProgressInfo>();
  qRegisterMetaType<QuantizeOutcome>();
  m_pool.setMaxThreadCount(2);  // one job and one planning at a time
}

QuantizeTask::~QuantizeTask() {
  m_cancel = true;
  m_pool.waitForDone();
}

void QuantizeTask::planCandidates(const QString& path, const LoadSettings& settings,
                                  const DeviceInfo& device) {
  const quint64 serial = ++m_planSerial;
  m_pool.start([this, path, settings, device, serial] {
    lowerCurrentThreadPriority();
    QuantCandidates c = planQuantCandidates(path, settings, device, estimateBandwidth(device));
    if (c.error.isEmpty()) {
      // What earlier jobs and comparisons measured of this model's outputs (file reads: here,
      // off the GUI thread).
      QVector<CompareRun> runs;
      for (const SavedCompareRun& saved : listCompareRuns(defaultCompareRunsFolder(), 32)) {
        CompareRun run;
        QString error;
        if (loadCompareRun(saved.path, &run, &error)) runs.push_back(run);
      }
      applyMeasuredFigures(&c.candidates, path, c.bandwidth.deviceLabel, quantOutputs(), runs);
    }
    QMetaObject::invokeMethod(
        this,
        [this, c, serial] {
          if (serial == m_planSerial.load()) emit candidatesReady(c);
        },
        Qt::QueuedConnection);
  });
}

bool QuantizeTask::start(const QuantizeSpec& spec) {
  if (m_running) return false;
  m_running = true;
  m_spec = spec;
  m_last = QuantizeProgressInfo{};
  m_cancel = false;
  m_pool.start([this, spec] { runJob(spec); });
  return true;
}

void QuantizeTask::cancel() {
  if (m_running) m_cancel = true;
}

void QuantizeTask::runJob(const QuantizeSpec& spec) {
  lowerCurrentThreadPriority();
  auto finish = [this](const QuantizeOutcome& o) {
    QMetaObject::invokeMethod(
        this,
        [this, o] {
          m_running = false;
          emit finished(o);
        },
        Qt::QueuedConnection);
  };
  QuantizeRequest r;
  r.model = spec.model.toStdString();
  r.output = spec.output.toStdString();
  r.scheme.scheme = spec.scheme.toStdString();
  r.scheme.bits = spec.bits;
  r.scheme.group_size = spec.groupSize;
  r.scheme.format = spec.format.toStdString();
  r.calibration.file = spec.calibrationFile.toStdString();
  r.calibration.num_samples = spec.calibrationSamples;
  r.calibration.seq_len = spec.calibrationSeqLen;
  r.device = "auto";  // gptq, awq: the GPU when one is usable, else the CPU
  auto prepared = QuantizeJob::prepare(r);
  if (!prepared.is_ok()) {
    QuantizeOutcome o;
    o.kind = QuantizeOutcome::Kind::kFailed;
    o.output = spec.output;
    o.message = QString::fromStdString(prepared.status().message());
    finish(o);
    return;
  }
  QuantizeJob& job = *prepared.value();
  QMetaObject::invokeMethod(
      this,
      [this, d = QString::fromStdString(job.scheme().description()),
       bytes = static_cast<qint64>(job.expected_bytes())] { emit started(d, bytes); },
      Qt::QueuedConnection);
  // Progress goes to the GUI thread at most every 100 ms and at every finished layer.
  using Clock = std::chrono::steady_clock;
  Clock::time_point lastPost{};
  auto onProgress = [this, &lastPost](const QuantizeProgress& p) {
    const Clock::time_point now = Clock::now();
    if (!p.layer_finished && now - lastPost < std::chrono::milliseconds(100)) return;
    lastPost = now;
    QuantizeProgressInfo info;
    info.tensorsDone = p.tensors_done;
    info.tensorsTotal = p.tensors_total;
    info.layer = p.layer;
    info.numLayers = p.num_layers;
    info.tensor = QString::fromStdString(p.tensor);
    info.elapsedSec = p.elapsed_s;
    info.etaSec = p.eta_s;
    info.residentBytes = residentMemoryBytes();
    info.device = QString::fromStdString(p.device);
    info.peakDeviceBytes = p.peak_device_bytes;
    m_lastPosted = info;
    QMetaObject::invokeMethod(
        this,
        [this, info] {
          m_last = info;
          emit progress(info);
        },
        Qt::QueuedConnection);
  };
  auto result = job.run(onProgress, &m_cancel);
  QuantizeOutcome o;
  o.output = spec.output;
  if (!result.is_ok()) {
    o.kind = result.status().code() == ErrorCode::kCancelled ? QuantizeOutcome::Kind::kCancelled
                                                             : QuantizeOutcome::Kind::kFailed;
    o.message = QString::fromStdString(result.status().message());
    finish(o);
    return;
  }
  const QuantizeResult& q = result.value();
  o.kind = QuantizeOutcome::Kind::kFinished;
  o.outputBytes = q.output_bytes;
  o.quantizedTensors = q.quantized_tensors;
  o.keptTensors = q.kept_tensors;
  o.seconds = q.seconds;
  for (const std::string& n : q.notes) o.notes << QString::fromStdString(n);
  if (!q.holdout_message.empty()) o.notes << QString::fromStdString(q.holdout_message);
  if (!spec.evalText.isEmpty()) o.quality = measureQuality(spec);
  // Remembered for later plans of this model (measured figures in the candidate table).
  recordQuantOutput({spec.model, spec.scheme, spec.bits, spec.output, o.quality});
  finish(o);
}

QualityReport QuantizeTask::measureQuality(const QuantizeSpec& spec) {
  auto onProgress = [this](const EvalProgress& p) {
    QuantizeProgressInfo info = m_lastPosted;
    info.evaluating = true;
    info.tensorsDone = p.windows_done;
    info.tensorsTotal = p.windows_total;
    info.elapsedSec = p.elapsed_s;
    info.etaSec = p.eta_s;
    info.residentBytes = residentMemoryBytes();
    QMetaObject::invokeMethod(
        this,
        [this, info] {
          m_last = info;
          emit progress(info);
        },
        Qt::QueuedConnection);
  };
  return lathe::ui::measureQuality(
      {spec.output, spec.model, spec.evalText, spec.evalContext, spec.evalWindows}, onProgress,
      &m_cancel);
}

}  // namespace lathe::ui
