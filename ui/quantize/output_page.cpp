#include "ui/quantize/output_page.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>

#include "ui/bridge/quantize_task.h"

namespace lathe::ui {

QString proposeOutputPath(const QString& modelPath, const QuantCandidate& c) {
  const QFileInfo info(modelPath);
  const QString stem = info.isDir() ? info.fileName() : info.completeBaseName();
  QString tag = c.scheme == QLatin1String("rtn") ? QStringLiteral("int%1").arg(c.bits)
                : c.bits > 0 ? QStringLiteral("%1-int%2").arg(c.scheme).arg(c.bits)
                             : c.scheme;
  tag = tag.toUpper().replace(QLatin1Char('-'), QLatin1Char('_'));
  const QDir dir = info.absoluteDir();
  for (int n = 1;; ++n) {
    const QString suffix = n == 1 ? QString() : QStringLiteral("-%1").arg(n);
    const QString name =
        QStringLiteral("%1-%2%3%4")
            .arg(stem, tag, suffix, c.isGguf ? QStringLiteral(".gguf") : QString());
    if (!QFileInfo::exists(dir.filePath(name))) return dir.filePath(name);
  }
}

OutputPage::OutputPage(QWidget* parent) : QWizardPage(parent) {
  setTitle(tr("Step 3 — Output"));
  setSubTitle(
      tr("Where the quantized model goes. It is written under a temporary name and "
         "appears under this name only when complete."));
  auto* form = new QFormLayout(this);
  m_scheme = new QLabel;
  m_scheme->setObjectName(QStringLiteral("outputScheme"));
  m_scheme->setWordWrap(true);
  form->addRow(tr("Scheme:"), m_scheme);
  m_format = new QComboBox;
  m_format->setObjectName(QStringLiteral("outputFormat"));
  m_format->setToolTip(
      tr("The layout of the Hugging Face folder. compressed-tensors loads in "
         "vLLM and Lathe; GPTQ and AWQ layouts load in most runtimes."));
  form->addRow(tr("Format:"), m_format);
  auto* groupRow = new QHBoxLayout;
  m_groupSize = new QSpinBox;
  m_groupSize->setObjectName(QStringLiteral("groupSize"));
  m_groupSize->setRange(-1, 65536);
  m_groupSize->setSpecialValueText(tr("per channel"));
  m_groupSize->setValue(128);
  m_groupSize->setToolTip(
      tr("Input columns that share one scale: smaller groups are more "
         "accurate and a little larger. Must divide every layer's inputs."));
  m_groupLabel = new QLabel(tr("Group size:"));
  groupRow->addWidget(m_groupSize);
  groupRow->addStretch(1);
  form->addRow(m_groupLabel, groupRow);
  auto* outRow = new QHBoxLayout;
  m_output = new QLineEdit;
  m_output->setObjectName(QStringLiteral("outputPath"));
  auto* browseButton = new QPushButton(tr("Browse…"));
  outRow->addWidget(m_output, 1);
  outRow->addWidget(browseButton);
  form->addRow(tr("Save as:"), outRow);
  m_evaluate = new QCheckBox;
  m_evaluate->setObjectName(QStringLiteral("measureQuality"));
  form->addRow(tr("Quality:"), m_evaluate);
  setEvaluation(true);
  m_error = new QLabel;
  m_error->setObjectName(QStringLiteral("outputError"));
  m_error->setWordWrap(true);
  m_error->setStyleSheet(QStringLiteral("color:#dc2626"));
  form->addRow(m_error);
  connect(browseButton, &QPushButton::clicked, this, &OutputPage::browse);
  connect(m_output, &QLineEdit::textChanged, this, [this] { m_error->clear(); });
}

void OutputPage::setChoice(const QString& modelPath, const QuantCandidate& candidate) {
  const bool changed = candidate.scheme != m_candidate.scheme ||
                       candidate.bits != m_candidate.bits || modelPath != m_model;
  m_model = modelPath;
  m_candidate = candidate;
  m_scheme->setText(QStringLiteral("%1 — %2").arg(candidate.label, candidate.description));
  m_format->clear();
  if (candidate.isGguf) {
    m_format->addItem(tr("GGUF file (llama.cpp, Lathe)"), QString());
  } else if (candidate.bits > 0) {
    // The scheme's own layout first (its default), then the others that hold it.
    if (candidate.scheme == QLatin1String("gptq"))
      m_format->addItem(tr("GPTQ folder"), QStringLiteral("gptq"));
    if (candidate.scheme == QLatin1String("awq"))
      m_format->addItem(tr("AWQ folder"), QStringLiteral("awq"));
    m_format->addItem(tr("compressed-tensors folder"), QStringLiteral("compressed-tensors"));
    if (candidate.scheme != QLatin1String("gptq"))
      m_format->addItem(tr("GPTQ folder"), QStringLiteral("gptq"));
    if (candidate.scheme == QLatin1String("rtn") && candidate.bits == 4)
      m_format->addItem(tr("AWQ folder"), QStringLiteral("awq"));
  } else {
    m_format->addItem(tr("compressed-tensors folder"), QStringLiteral("compressed-tensors"));
  }
  m_format->setEnabled(m_format->count() > 1);
  const bool grouped = candidate.bits > 0;
  m_groupSize->setVisible(grouped);
  m_groupLabel->setVisible(grouped);
  if (changed) {
    m_output->setText(proposeOutputPath(modelPath, candidate));
    if (grouped) m_groupSize->setValue(static_cast<int>(candidate.groupSize));
  }
  m_error->clear();
}

void OutputPage::setEvaluation(bool on, int context, int windows, const QString& text) {
  m_evalText = text.isEmpty() ? defaultEvalTextPath() : text;
  m_evalContext = context;
  m_evalWindows = windows;
  const bool available = !m_evalText.isEmpty();
  m_evaluate->setEnabled(available);
  m_evaluate->setChecked(on && available);
  m_evaluate->setText(
      available ? tr("Measure against the original afterwards: perplexity, KL divergence and top-1 "
                     "agreement on %1 (%2 windows of %3 tokens)")
                      .arg(QFileInfo(m_evalText).fileName())
                      .arg(windows)
                      .arg(context)
                : tr("Measuring needs the held-out text: run scripts/fetch-eval-text.sh"));
  m_evaluate->setToolTip(m_evalText);
}

void OutputPage::initializePage() {
  m_error->clear();
}

QuantizeSpec OutputPage::spec() const {
  QuantizeSpec s;
  s.model = m_model;
  s.output = m_output->text().trimmed();
  s.scheme = m_candidate.scheme;
  s.bits = m_candidate.bits;
  if (m_candidate.bits > 0) {
    s.groupSize = m_groupSize->value() == 0 ? -1 : m_groupSize->value();
    s.format = m_format->currentData().toString();
  }
  if (m_evaluate->isChecked()) {
    s.evalText = m_evalText;
    s.evalContext = m_evalContext;
    s.evalWindows = m_evalWindows;
  }
  return s;
}

void OutputPage::setOutputPath(const QString& path) {
  m_output->setText(path);
}

void OutputPage::setFormat(const QString& format) {
  const int i = m_format->findData(format);
  if (i >= 0) m_format->setCurrentIndex(i);
}

void OutputPage::setGroupSize(qint64 groupSize) {
  m_groupSize->setValue(static_cast<int>(groupSize));
}

QString OutputPage::error() const {
  return m_error->text();
}

bool OutputPage::validatePage() {
  const QString out = m_output->text().trimmed();
  const QFileInfo info(out);
  QString problem;
  if (out.isEmpty()) {
    problem = tr("Choose where to save the quantized model.");
  } else if (info.exists()) {
    problem = tr("%1 already exists. Choose another name, or delete it first; the wizard never "
                 "overwrites a model.")
                  .arg(out);
  } else if (!info.absoluteDir().exists()) {
    problem = tr("The folder %1 does not exist. Create it or choose another place.")
                  .arg(info.absolutePath());
  } else if (QFileInfo(out).absoluteFilePath() == QFileInfo(m_model).absoluteFilePath()) {
    problem = tr("That is the model itself; choose another name.");
  } else if (m_candidate.isGguf && !out.endsWith(QLatin1String(".gguf"), Qt::CaseInsensitive)) {
    problem = tr("A GGUF output is one file: end its name with .gguf.");
  }
  m_error->setText(problem);
  return problem.isEmpty();
}

void OutputPage::browse() {
  const QString start = m_output->text();
  const QString path =
      m_candidate.isGguf
          ? QFileDialog::getSaveFileName(this, tr("Save GGUF as"), start,
                                         tr("GGUF models (*.gguf)"))
          : QFileDialog::getSaveFileName(this, tr("Save model folder as"), start, QString(),
                                         nullptr, QFileDialog::ShowDirsOnly);
  if (!path.isEmpty()) m_output->setText(path);
}

}  // namespace lathe::ui
