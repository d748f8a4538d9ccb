// The quantization wizard's Run page: starts the job on the QuantizeTask (off the GUI thread) and
// shows a progress bar with the layer, elapsed time, ETA and the process's memory; "Stop" cancels
// within a tensor and leaves nothing under the output name. A refusal of the library (group size,
// disk space, …) is shown here with "Back" to change the choice.
#pragma once

#include <QWizardPage>

#include "ui/bridge/quantize_types.h"

class QLabel;
class QProgressBar;
class QPushButton;

namespace lathe::ui {

class MessageBanner;
class QuantizeTask;

class RunPage : public QWizardPage {
  Q_OBJECT
 public:
  RunPage(QuantizeTask* task, QWidget* parent = nullptr);

  void setSpec(const QuantizeSpec& spec) { m_spec = spec; }
  // Closing the wizard cleans its pages up too; a job then keeps running (set by the wizard).
  void setKeepJobOnCleanup(bool keep) { m_keepJob = keep; }
  void initializePage() override;
  void cleanupPage() override;
  bool isComplete() const override;

  const QuantizeOutcome& outcome() const { return m_outcome; }
  bool hasOutcome() const { return m_hasOutcome; }
  MessageBanner* banner() const { return m_banner; }
  QProgressBar* progressBar() const { return m_bar; }
  QPushButton* stopButton() const { return m_stop; }

 signals:
  void jobFinished(const lathe::ui::QuantizeOutcome& outcome);

 private:
  void onStarted(const QString& description, qint64 expectedBytes);
  void onProgress(const QuantizeProgressInfo& info);
  void onFinished(const QuantizeOutcome& outcome);

  QuantizeTask* m_task;
  QuantizeSpec m_spec;
  QuantizeOutcome m_outcome;
  bool m_hasOutcome = false;
  bool m_ownsJob = false;  // this page started the running job
  bool m_keepJob = false;
  MessageBanner* m_banner = nullptr;
  QLabel* m_what = nullptr;
  QProgressBar* m_bar = nullptr;
  QLabel* m_detail = nullptr;
  QPushButton* m_stop = nullptr;
};

// "12 s", "3.4 min", "1.2 h"
QString formatDuration(double seconds);
// "layer 12/30", "embedding, norm and head"
QString describeLayer(const QuantizeProgressInfo& info);

}  // namespace lathe::ui
