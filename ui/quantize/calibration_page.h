// Step 2 of the quantization wizard, for the calibrated schemes (GPTQ, AWQ): which text the model
// reads to learn each layer's input statistics (the built-in set, or a text / JSONL chat /
// ShareGPT file), and how much of it (samples × tokens). The library reads and checks the set
// before any work (engine/quant/calibration.h); its refusal shows on the Run page.
#pragma once

#include <QWizardPage>

#include "ui/bridge/quantize_types.h"

class QLineEdit;
class QRadioButton;
class QSpinBox;

namespace lathe::ui {

class CalibrationPage : public QWizardPage {
  Q_OBJECT
 public:
  explicit CalibrationPage(QWidget* parent = nullptr);

  // Copies the choices into spec's calibration fields.
  void apply(QuantizeSpec* spec) const;
  void setFile(const QString& path);  // empty: the built-in set
  void setSize(int samples, int tokens);
  bool validatePage() override;

 private:
  QRadioButton* m_builtin = nullptr;
  QRadioButton* m_fromFile = nullptr;
  QLineEdit* m_file = nullptr;
  QSpinBox* m_samples = nullptr;
  QSpinBox* m_tokens = nullptr;
};

}  // namespace lathe::ui
