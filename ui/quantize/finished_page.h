// The quantization wizard's last page: what was written (path, size, time, tensors, the writer's
// notes), the quality card (measured by lathe eval when it exists; until then the expected figure
// from the literature, marked so), and the next steps: Load, Compare with original, Show in folder.
#pragma once

#include <QWizardPage>

#include "ui/bridge/quantize_types.h"

class QLabel;
class QPushButton;

namespace lathe::ui {

class FinishedPage : public QWizardPage {
  Q_OBJECT
 public:
  explicit FinishedPage(QWidget* parent = nullptr);

  void setResult(const QuantizeSpec& spec, const QuantizeOutcome& outcome,
                 const QuantCandidate& candidate);
  QPushButton* loadButton() const { return m_load; }
  QPushButton* compareButton() const { return m_compare; }
  QPushButton* showButton() const { return m_show; }
  QString summaryText() const;

 signals:
  void loadRequested(const QString& path);
  void compareRequested(const QString& original, const QString& quantized);

 private:
  QuantizeSpec m_spec;
  QLabel* m_summary = nullptr;
  QLabel* m_quality = nullptr;
  QPushButton* m_load = nullptr;
  QPushButton* m_compare = nullptr;
  QPushButton* m_show = nullptr;
};

}  // namespace lathe::ui
