// QuantizeTask: runs the quantization library (engine/quant/quantize_model.h) for Lathe Studio off
// the GUI thread, one job at a time, and plans the wizard's candidate table. Progress, the outcome
// and the planned candidates come back as queued signals. The task outlives the wizard (the main
// window owns it), so closing the wizard keeps a job running; the status bar follows progress().
//
// Cancel: the library polls the flag between tensors, so a job stops within one tensor's work
// (well under a second for the default model, a few seconds for a 70B embedding) and removes its
// temporary output: nothing appears under the output name (atomic_output.h).
#pragma once

#include <QObject>
#include <QThreadPool>

#include <atomic>

#include "ui/bridge/bridge_types.h"
#include "ui/bridge/quantize_types.h"
#include "ui/settings/load_settings.h"

namespace lathe::ui {

class QuantizeTask : public QObject {
  Q_OBJECT
 public:
  explicit QuantizeTask(QObject* parent = nullptr);
  ~QuantizeTask() override;  // cancels a running job and waits for it

  // Plans the candidates for `path` on a pool thread; emits candidatesReady (only the newest
  // request's answer is delivered).
  void planCandidates(const QString& path, const LoadSettings& settings, const DeviceInfo& device);

  // Starts a job. False (and nothing happens) while another job runs. Emits started, progress…,
  // then exactly one finished.
  bool start(const QuantizeSpec& spec);
  void cancel();
  bool isRunning() const { return m_running; }
  const QuantizeSpec& spec() const { return m_spec; }  // of the running or last job
  const QuantizeProgressInfo& lastProgress() const { return m_last; }

 signals:
  void candidatesReady(const lathe::ui::QuantCandidates& candidates);
  // The job passed every check (scheme, source, output name, group size, disk space) and runs.
  void started(const QString& description, qint64 expectedBytes);
  void progress(const lathe::ui::QuantizeProgressInfo& info);
  void finished(const lathe::ui::QuantizeOutcome& outcome);

 private:
  void runJob(const QuantizeSpec& spec);
  QualityReport measureQuality(const QuantizeSpec& spec);

  QuantizeSpec m_spec;
  QuantizeProgressInfo m_last;        // GUI thread
  QuantizeProgressInfo m_lastPosted;  // the job's thread
  bool m_running = false;             // GUI thread
  std::atomic<bool> m_cancel{false};
  std::atomic<quint64> m_planSerial{0};
  QThreadPool m_pool;
};

// The held-out text the wizard measures quality on (Alice's Adventures in Wonderland from the
// Canterbury corpus, fetched by scripts/fetch-eval-text.sh), or empty when it is not there.
QString defaultEvalTextPath();

// Resident memory of this process in bytes (Linux /proc/self/statm; 0 elsewhere).
qint64 residentMemoryBytes();

}  // namespace lathe::ui
