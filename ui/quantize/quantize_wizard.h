// The quantization wizard (Models ▸ Quantize…, File ▸ Quantize Model…, or offered when a dropped
// model does not fit): Step 1 goal and scheme (goal_page), Step 2 calibration for GPTQ/AWQ only
// (calibration_page), Step 3 output (output_page), the run (run_page) and the result with the
// measured quality (finished_page).
//
// The job belongs to the QuantizeTask (owned by the main window): closing the wizard leaves it
// running, with its progress in the status bar.
#pragma once

#include <QWizard>

#include "ui/bridge/bridge_types.h"
#include "ui/bridge/quantize_types.h"
#include "ui/settings/load_settings.h"

namespace lathe::ui {

class CalibrationPage;
class FinishedPage;
class GoalPage;
class OutputPage;
class QuantizeTask;
class RunPage;

class QuantizeWizard : public QWizard {
  Q_OBJECT
 public:
  enum PageId { kGoalPage, kCalibrationPage, kOutputPage, kRunPage, kFinishedPage };

  // task: not owned, must outlive the wizard. Plans the candidates for `modelPath` at once.
  QuantizeWizard(QuantizeTask* task, const QString& modelPath, const LoadSettings& settings,
                 const DeviceInfo& device, QWidget* parent = nullptr);

  GoalPage* goalPage() const { return m_goal; }
  CalibrationPage* calibrationPage() const { return m_calibration; }
  OutputPage* outputPage() const { return m_output; }
  RunPage* runPage() const { return m_run; }
  FinishedPage* finishedPage() const { return m_finished; }
  QString modelPath() const { return m_modelPath; }
  int nextId() const override;
  QuantizeSpec spec() const;  // the job the pages describe

 signals:
  void candidatesShown();  // the table is filled (tests, screenshots)
  void loadRequested(const QString& path);
  void compareRequested(const QString& original, const QString& quantized);

 protected:
  void initializePage(int id) override;
  void done(int result) override;  // closing keeps a running job

 private:
  QuantizeTask* m_task;
  QString m_modelPath;
  GoalPage* m_goal = nullptr;
  CalibrationPage* m_calibration = nullptr;
  OutputPage* m_output = nullptr;
  RunPage* m_run = nullptr;
  FinishedPage* m_finished = nullptr;
};

}  // namespace lathe::ui
