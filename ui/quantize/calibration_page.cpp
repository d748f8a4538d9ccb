#include "ui/quantize/calibration_page.h"

#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLineEdit>
#include <QPushButton>
#include <QRadioButton>
#include <QSpinBox>
#include <QVBoxLayout>

namespace lathe::ui {

CalibrationPage::CalibrationPage(QWidget* parent) : QWizardPage(parent) {
  setTitle(tr("Step 2 — Calibration"));
  setSubTitle(
      tr("GPTQ and AWQ choose each weight by watching the model read some text. Text like "
         "what the model will see works best; the built-in set mixes languages, code and "
         "maths."));
  auto* form = new QFormLayout(this);
  m_builtin = new QRadioButton(tr("Built-in set (calibration.txt)"));
  m_builtin->setObjectName(QStringLiteral("calibrationBuiltin"));
  m_builtin->setChecked(true);
  m_fromFile = new QRadioButton(tr("A file:"));
  m_fromFile->setToolTip(
      tr("Plain UTF-8 text, JSONL ({\"messages\": […]}, {\"text\": …}) or "
         "ShareGPT JSON; conversations are rendered with the chat template."));
  m_file = new QLineEdit;
  m_file->setObjectName(QStringLiteral("calibrationFile"));
  auto* browse = new QPushButton(tr("Browse…"));
  auto* fileRow = new QHBoxLayout;
  fileRow->addWidget(m_fromFile);
  fileRow->addWidget(m_file, 1);
  fileRow->addWidget(browse);
  auto* source = new QVBoxLayout;
  source->addWidget(m_builtin);
  source->addLayout(fileRow);
  form->addRow(tr("Text:"), source);
  m_samples = new QSpinBox;
  m_samples->setObjectName(QStringLiteral("calibrationSamples"));
  m_samples->setRange(1, 4096);
  m_samples->setValue(128);
  m_samples->setToolTip(
      tr("Sequences run through the model (128 is the usual choice; fewer is "
         "faster and a little less accurate)."));
  form->addRow(tr("Samples:"), m_samples);
  m_tokens = new QSpinBox;
  m_tokens->setObjectName(QStringLiteral("calibrationTokens"));
  m_tokens->setRange(16, 8192);
  m_tokens->setValue(512);
  m_tokens->setSuffix(tr(" tokens each"));
  form->addRow(tr("Length:"), m_tokens);
  connect(browse, &QPushButton::clicked, this, [this] {
    const QString path =
        QFileDialog::getOpenFileName(this, tr("Calibration text"), QString(),
                                     tr("Text or chats (*.txt *.jsonl *.json);;All files (*)"));
    if (!path.isEmpty()) setFile(path);
  });
  connect(m_file, &QLineEdit::textEdited, this, [this] { m_fromFile->setChecked(true); });
}

void CalibrationPage::setFile(const QString& path) {
  m_file->setText(path);
  (path.isEmpty() ? m_builtin : m_fromFile)->setChecked(true);
}

void CalibrationPage::setSize(int samples, int tokens) {
  m_samples->setValue(samples);
  m_tokens->setValue(tokens);
}

void CalibrationPage::apply(QuantizeSpec* spec) const {
  spec->calibrationFile = m_fromFile->isChecked() ? m_file->text().trimmed() : QString();
  spec->calibrationSamples = m_samples->value();
  spec->calibrationSeqLen = m_tokens->value();
}

bool CalibrationPage::validatePage() {
  // The library checks the contents; here only that a chosen file exists.
  return m_builtin->isChecked() || QFileInfo(m_file->text().trimmed()).isFile();
}

}  // namespace lathe::ui
