#include "ui/chat/sampling_controls.h"

#include <QCheckBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLineEdit>
#include <QRegularExpressionValidator>
#include <QSpinBox>

namespace lathe::ui {

namespace {
QDoubleSpinBox* makeDouble(double lo, double hi, double step, int decimals, const QString& tip) {
  auto* spin = new QDoubleSpinBox;
  spin->setRange(lo, hi);
  spin->setSingleStep(step);
  spin->setDecimals(decimals);
  spin->setToolTip(tip);
  return spin;
}
}  // namespace

SamplingControls::SamplingControls(QWidget* parent) : QWidget(parent) {
  auto* form = new QFormLayout(this);
  form->setContentsMargins(0, 0, 0, 0);
  m_temperature = makeDouble(0.0, 2.0, 0.05, 2, tr("0 = greedy (always the most likely token)."));
  m_temperature->setObjectName(QStringLiteral("temperature"));
  m_topP = makeDouble(0.01, 1.0, 0.05, 2,
                      tr("Sample from the smallest set of tokens whose "
                         "probabilities add up to this."));
  m_topK = new QSpinBox;
  m_topK->setRange(0, 1000);
  m_topK->setSpecialValueText(tr("off"));
  m_topK->setToolTip(tr("Sample among the k most likely tokens; 0 = off."));
  m_minP = makeDouble(0.0, 1.0, 0.01, 2,
                      tr("Drop tokens less likely than this times the most "
                         "likely one; 0 = off."));
  m_repetition = makeDouble(0.5, 2.0, 0.05, 2,
                            tr("Above 1 discourages repeating tokens already "
                               "in the prompt or the reply."));
  m_maxTokens = new QSpinBox;
  m_maxTokens->setObjectName(QStringLiteral("maxTokens"));
  m_maxTokens->setRange(1, 1 << 20);
  m_maxTokens->setSingleStep(64);
  m_maxTokens->setToolTip(tr("The reply stops after this many tokens (finish reason \"length\")."));
  auto* seedRow = new QHBoxLayout;
  m_useSeed = new QCheckBox(tr("Fixed"));
  m_seed = new QLineEdit;
  m_seed->setValidator(
      new QRegularExpressionValidator(QRegularExpression(QStringLiteral("\\d{1,19}")), m_seed));
  m_seed->setPlaceholderText(tr("random"));
  m_seed->setToolTip(tr("The same seed and prompt give the same reply."));
  seedRow->addWidget(m_useSeed);
  seedRow->addWidget(m_seed, 1);
  form->addRow(tr("Temperature:"), m_temperature);
  form->addRow(tr("Top-p:"), m_topP);
  form->addRow(tr("Top-k:"), m_topK);
  form->addRow(tr("Min-p:"), m_minP);
  form->addRow(tr("Repetition penalty:"), m_repetition);
  form->addRow(tr("Max tokens:"), m_maxTokens);
  form->addRow(tr("Seed:"), seedRow);
  setSettings(SamplingSettings{});

  for (auto* s : {m_temperature, m_topP, m_minP, m_repetition})
    connect(s, &QDoubleSpinBox::valueChanged, this, &SamplingControls::emitChanged);
  for (auto* s : {m_topK, m_maxTokens})
    connect(s, &QSpinBox::valueChanged, this, &SamplingControls::emitChanged);
  connect(m_useSeed, &QCheckBox::toggled, this, [this](bool on) {
    m_seed->setEnabled(on);
    emitChanged();
  });
  connect(m_seed, &QLineEdit::textChanged, this, &SamplingControls::emitChanged);
}

SamplingSettings SamplingControls::settings() const {
  SamplingSettings s;
  s.temperature = m_temperature->value();
  s.topP = m_topP->value();
  s.topK = m_topK->value();
  s.minP = m_minP->value();
  s.repetitionPenalty = m_repetition->value();
  s.maxTokens = m_maxTokens->value();
  bool ok = false;
  const quint64 seed = m_seed->text().toULongLong(&ok);
  if (m_useSeed->isChecked() && ok) s.seed = seed;
  return s;
}

void SamplingControls::setSettings(const SamplingSettings& s) {
  m_updating = true;
  m_temperature->setValue(s.temperature);
  m_topP->setValue(s.topP);
  m_topK->setValue(s.topK);
  m_minP->setValue(s.minP);
  m_repetition->setValue(s.repetitionPenalty);
  m_maxTokens->setValue(s.maxTokens);
  m_useSeed->setChecked(s.seed.has_value());
  m_seed->setEnabled(s.seed.has_value());
  m_seed->setText(s.seed ? QString::number(*s.seed) : QString());
  m_updating = false;
}

void SamplingControls::emitChanged() {
  if (!m_updating) emit changed(settings());
}

}  // namespace lathe::ui
