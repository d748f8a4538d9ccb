// Step 3 of the quantization wizard: the output's format (GGUF file, or a Hugging Face folder in
// compressed-tensors / GPTQ / AWQ layout), the group size of integer schemes, and where to write.
// Cheap checks (folder exists, name taken) are shown here; the library checks the rest (group
// size against every layer, free disk space) before it starts and the Run page shows its message.
#pragma once

#include <QWizardPage>

#include "ui/bridge/quantize_types.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QSpinBox;

namespace lathe::ui {

class OutputPage : public QWizardPage {
  Q_OBJECT
 public:
  explicit OutputPage(QWidget* parent = nullptr);

  // Sets the scheme and proposes an output name next to the model.
  void setChoice(const QString& modelPath, const QuantCandidate& candidate);
  QuantizeSpec spec() const;

  void setOutputPath(const QString& path);
  void setFormat(const QString& format);  // gptq | awq | compressed-tensors
  void setGroupSize(qint64 groupSize);    // -1: per channel
  QString error() const;                  // the last refusal shown, or empty
  // Measure quality afterwards on `text` (empty: the default held-out text) with windows of
  // `context` tokens, at most `windows` of them.
  void setEvaluation(bool on, int context = 512, int windows = 8, const QString& text = QString());

  void initializePage() override;
  bool validatePage() override;

 private:
  void browse();

  QString m_model;
  QuantCandidate m_candidate;
  QLabel* m_scheme = nullptr;
  QComboBox* m_format = nullptr;
  QSpinBox* m_groupSize = nullptr;
  QLabel* m_groupLabel = nullptr;
  QLineEdit* m_output = nullptr;
  QLabel* m_error = nullptr;
  QCheckBox* m_evaluate = nullptr;
  QString m_evalText;
  int m_evalContext = 512;
  int m_evalWindows = 8;
};

// "<model folder>/<stem>-<scheme>.gguf" or ".../<stem>-<scheme>" (a folder), not yet taken.
QString proposeOutputPath(const QString& modelPath, const QuantCandidate& candidate);

}  // namespace lathe::ui
