#include "ui/quantize/quantize_wizard.h"

#include <QFileInfo>

#include "ui/bridge/quantize_task.h"
#include "ui/quantize/calibration_page.h"
#include "ui/quantize/finished_page.h"
#include "ui/quantize/goal_page.h"
#include "ui/quantize/output_page.h"
#include "ui/quantize/run_page.h"

namespace lathe::ui {

QuantizeWizard::QuantizeWizard(QuantizeTask* task, const QString& modelPath,
                               const LoadSettings& settings, const DeviceInfo& device,
                               QWidget* parent)
    : QWizard(parent), m_task(task), m_modelPath(modelPath) {
  setObjectName(QStringLiteral("quantizeWizard"));
  setWindowTitle(tr("Quantize %1").arg(QFileInfo(modelPath).fileName()));
  setWizardStyle(QWizard::ModernStyle);
  setOption(QWizard::NoBackButtonOnLastPage);
  setButtonText(QWizard::CancelButton, tr("Close"));
  m_goal = new GoalPage;
  m_calibration = new CalibrationPage;
  m_output = new OutputPage;
  m_run = new RunPage(task);
  m_finished = new FinishedPage;
  setPage(kGoalPage, m_goal);
  setPage(kCalibrationPage, m_calibration);
  setPage(kOutputPage, m_output);
  setPage(kRunPage, m_run);
  setPage(kFinishedPage, m_finished);
  resize(980, 640);

  connect(task, &QuantizeTask::candidatesReady, this, [this](const QuantCandidates& c) {
    if (c.modelPath != m_modelPath) return;
    m_goal->setCandidates(c);
    emit candidatesShown();
  });
  // A finished job moves on to the result by itself.
  connect(m_run, &RunPage::jobFinished, this, [this](const QuantizeOutcome& o) {
    if (o.kind == QuantizeOutcome::Kind::kFinished && currentId() == kRunPage) next();
  });
  connect(m_finished, &FinishedPage::loadRequested, this, &QuantizeWizard::loadRequested);
  connect(m_finished, &FinishedPage::compareRequested, this, &QuantizeWizard::compareRequested);
  task->planCandidates(modelPath, settings, device);
}

int QuantizeWizard::nextId() const {
  // Step 2 only for the schemes that need calibration data.
  if (currentId() == kGoalPage)
    return m_goal->chosen() != nullptr && m_goal->chosen()->needsCalibration ? kCalibrationPage
                                                                             : kOutputPage;
  return QWizard::nextId();
}

QuantizeSpec QuantizeWizard::spec() const {
  QuantizeSpec s = m_output->spec();
  if (m_goal->chosen() != nullptr && m_goal->chosen()->needsCalibration) m_calibration->apply(&s);
  return s;
}

void QuantizeWizard::initializePage(int id) {
  if (id == kOutputPage && m_goal->chosen() != nullptr)
    m_output->setChoice(m_modelPath, *m_goal->chosen());
  if (id == kRunPage) m_run->setSpec(spec());
  if (id == kFinishedPage && m_goal->chosen() != nullptr)
    m_finished->setResult(spec(), m_run->outcome(), *m_goal->chosen());
  QWizard::initializePage(id);
}

}  // namespace lathe::ui

namespace lathe::ui {

void QuantizeWizard::done(int result) {
  m_run->setKeepJobOnCleanup(true);
  QWizard::done(result);
}

}  // namespace lathe::ui
