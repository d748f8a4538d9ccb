#include "ui/quantize/run_page.h"

#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QVBoxLayout>

#include "ui/bridge/quantize_task.h"
#include "ui/common/message_banner.h"
#include "ui/models/model_card.h"

namespace lathe::ui {

QString formatDuration(double s) {
  if (s < 90) return QObject::tr("%1 s").arg(s, 0, 'f', s < 10 ? 1 : 0);
  if (s < 5400) return QObject::tr("%1 min").arg(s / 60, 0, 'f', 1);
  return QObject::tr("%1 h").arg(s / 3600, 0, 'f', 1);
}

QString describeLayer(const QuantizeProgressInfo& info) {
  if (info.evaluating)
    return QObject::tr("measuring quality: window %1/%2")
        .arg(info.tensorsDone)
        .arg(info.tensorsTotal);
  return info.layer < 0 ? QObject::tr("embedding, norm and head")
                        : QObject::tr("layer %1/%2").arg(info.layer + 1).arg(info.numLayers);
}

RunPage::RunPage(QuantizeTask* task, QWidget* parent) : QWizardPage(parent), m_task(task) {
  setTitle(tr("Quantizing"));
  setSubTitle(
      tr("The work runs in the background: you may close this window and follow it in the "
         "status bar."));
  auto* layout = new QVBoxLayout(this);
  m_banner = new MessageBanner;
  m_banner->setObjectName(QStringLiteral("runBanner"));
  layout->addWidget(m_banner);
  m_what = new QLabel;
  m_what->setObjectName(QStringLiteral("runWhat"));
  m_what->setWordWrap(true);
  layout->addWidget(m_what);
  m_bar = new QProgressBar;
  m_bar->setObjectName(QStringLiteral("runProgress"));
  m_bar->setRange(0, 1000);
  m_bar->setFormat(QStringLiteral("%p%"));
  layout->addWidget(m_bar);
  m_detail = new QLabel;
  m_detail->setObjectName(QStringLiteral("runDetail"));
  layout->addWidget(m_detail);
  m_stop = new QPushButton(QIcon(QStringLiteral(":/icons/stop.svg")), tr("Stop quantizing"));
  m_stop->setObjectName(QStringLiteral("stopButton"));
  m_stop->setToolTip(tr("Stops within a second or so; nothing is left under the output name."));
  auto* row = new QHBoxLayout;
  row->addWidget(m_stop);
  row->addStretch(1);
  layout->addLayout(row);
  layout->addStretch(1);
  connect(m_stop, &QPushButton::clicked, m_task, &QuantizeTask::cancel);
  connect(m_task, &QuantizeTask::started, this, &RunPage::onStarted);
  connect(m_task, &QuantizeTask::progress, this, &RunPage::onProgress);
  connect(m_task, &QuantizeTask::finished, this, &RunPage::onFinished);
}

void RunPage::initializePage() {
  m_hasOutcome = false;
  m_banner->clear();
  m_bar->setValue(0);
  m_detail->clear();
  m_what->setText(tr("Checking %1 → %2…").arg(m_spec.model, m_spec.output));
  m_ownsJob = m_task->start(m_spec);
  m_stop->setEnabled(m_ownsJob);
  if (!m_ownsJob)
    m_banner->showMessage(MessageBanner::Kind::kWarning,
                          tr("Another quantization is still running (see the status bar). Wait "
                             "for it or stop it, then go Back and Next again."),
                          false);
}

void RunPage::cleanupPage() {
  // Back while running: stop the job (its outcome arrives as "cancelled").
  if (m_ownsJob && !m_keepJob && m_task->isRunning()) m_task->cancel();
}

bool RunPage::isComplete() const {
  return m_hasOutcome && m_outcome.kind == QuantizeOutcome::Kind::kFinished;
}

void RunPage::onStarted(const QString& description, qint64 expectedBytes) {
  if (!m_ownsJob) return;
  m_what->setText(tr("%1\n%2 → %3 (about %4)")
                      .arg(description, m_spec.model, m_spec.output, formatBytes(expectedBytes)));
}

void RunPage::onProgress(const QuantizeProgressInfo& p) {
  if (!m_ownsJob) return;
  m_bar->setValue(qRound(p.fraction() * 1000));
  QString text = tr("%1 · %2 elapsed · ETA %3 · memory %4")
                     .arg(describeLayer(p), formatDuration(p.elapsedSec), formatDuration(p.etaSec),
                          formatBytes(p.residentBytes));
  if (!p.device.isEmpty()) text += tr(" · on %1").arg(p.device);
  if (p.peakDeviceBytes > 0) text += tr(" (GPU memory %1)").arg(formatBytes(p.peakDeviceBytes));
  m_detail->setText(text);
}

void RunPage::onFinished(const QuantizeOutcome& o) {
  if (!m_ownsJob) return;
  m_ownsJob = false;
  m_outcome = o;
  m_hasOutcome = true;
  m_stop->setEnabled(false);
  switch (o.kind) {
    case QuantizeOutcome::Kind::kFinished:
      m_bar->setValue(1000);
      m_detail->setText(tr("Done in %1.").arg(formatDuration(o.seconds)));
      break;
    case QuantizeOutcome::Kind::kCancelled:
      m_banner->showMessage(MessageBanner::Kind::kInfo,
                            tr("Stopped. Nothing was written under %1.").arg(o.output), false);
      break;
    case QuantizeOutcome::Kind::kFailed:
      m_banner->showMessage(MessageBanner::Kind::kError,
                            tr("%1\nGo Back to change the choice.").arg(o.message), false);
      break;
  }
  emit completeChanged();
  emit jobFinished(o);
}

}  // namespace lathe::ui
