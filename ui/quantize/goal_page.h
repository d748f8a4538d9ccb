// Step 1 of the quantization wizard: the goal ("fit in N GiB", "fastest", "best quality that
// fits", "a specific scheme") and the candidate table, with the recommended row marked and one
// line of why. The table is planned by the library on a worker thread (QuantizeTask).
#pragma once

#include <QWizardPage>

#include "ui/bridge/quantize_types.h"
#include "ui/quantize/recommendation.h"

class QButtonGroup;
class QDoubleSpinBox;
class QLabel;
class QTableView;

namespace lathe::ui {

class CandidateTableModel;

class GoalPage : public QWizardPage {
  Q_OBJECT
 public:
  explicit GoalPage(QWidget* parent = nullptr);

  void setCandidates(const QuantCandidates& candidates);
  bool isComplete() const override;

  // The chosen candidate (the selected row); null before the table is ready.
  const QuantCandidate* chosen() const;
  QuantGoal goal() const;
  void setGoal(QuantGoal goal);
  void setBudgetGiB(double gib);
  void selectScheme(const QString& scheme, int bits = -1);  // tests, "specific" goal
  CandidateTableModel* table() const { return m_model; }
  QTableView* view() const { return m_view; }
  QString recommendationText() const;

 private:
  void updateRecommendation();

  CandidateTableModel* m_model = nullptr;
  QTableView* m_view = nullptr;
  QButtonGroup* m_goals = nullptr;
  QDoubleSpinBox* m_budget = nullptr;
  QLabel* m_status = nullptr;
  QLabel* m_recommendation = nullptr;
  QLabel* m_bandwidth = nullptr;
};

}  // namespace lathe::ui
