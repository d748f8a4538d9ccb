#include "ui/settings/load_settings_widget.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QInputDialog>
#include <QLabel>
#include <QPushButton>
#include <QSlider>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QVBoxLayout>

#include "ui/settings/preset_store.h"

namespace lathe::ui {

namespace {

QSpinBox* makeSpin(int max, int step, const QString& zeroText, const QString& tip) {
  auto* spin = new QSpinBox;
  spin->setRange(0, max);
  spin->setSingleStep(step);
  spin->setSpecialValueText(zeroText);
  spin->setToolTip(tip);
  spin->setAccelerated(true);
  return spin;
}

void selectData(QComboBox* combo, const QString& value) {
  const int i = combo->findData(value);
  combo->setCurrentIndex(i >= 0 ? i : 0);
}

}  // namespace

LoadSettingsWidget::LoadSettingsWidget(PresetStore* presets, QWidget* parent)
    : QWidget(parent), m_presets(presets) {
  buildForm();
  refreshPresets();
  applyPreset(m_presets->defaultPresetName());
  connect(m_presets, &PresetStore::presetsChanged, this, &LoadSettingsWidget::refreshPresets);
}

void LoadSettingsWidget::buildForm() {
  auto* root = new QVBoxLayout(this);
  root->setContentsMargins(0, 0, 0, 0);

  auto* presetRow = new QHBoxLayout;
  m_presetCombo = new QComboBox;
  m_presetCombo->setObjectName(QStringLiteral("presetCombo"));
  m_presetCombo->setToolTip(
      tr("Saved load settings. The default preset is applied to new models."));
  m_saveButton = new QPushButton(tr("Save as…"));
  m_defaultButton = new QPushButton(tr("Set as default"));
  m_deleteButton = new QPushButton(tr("Delete"));
  presetRow->addWidget(new QLabel(tr("Preset:")));
  presetRow->addWidget(m_presetCombo, 1);
  presetRow->addWidget(m_saveButton);
  presetRow->addWidget(m_defaultButton);
  presetRow->addWidget(m_deleteButton);
  root->addLayout(presetRow);
  m_presetStatus = new QLabel;
  m_presetStatus->setObjectName(QStringLiteral("presetStatus"));
  m_presetStatus->setWordWrap(true);
  root->addWidget(m_presetStatus);

  auto* form = new QFormLayout;
  m_device = new QComboBox;
  m_device->setObjectName(QStringLiteral("device"));
  m_device->addItem(tr("Auto (GPU when available)"), QStringLiteral("auto"));
  m_device->addItem(tr("CPU"), QStringLiteral("cpu"));
  m_device->addItem(tr("CUDA GPU"), QStringLiteral("cuda"));
  form->addRow(tr("Device:"), m_device);

  m_dtype = new QComboBox;
  m_dtype->setObjectName(QStringLiteral("dtype"));
  m_dtype->addItem(tr("Auto (BF16)"), QStringLiteral("auto"));
  m_dtype->addItem(QStringLiteral("BF16"), QStringLiteral("bf16"));
  m_dtype->addItem(QStringLiteral("FP16"), QStringLiteral("f16"));
  m_dtype->setToolTip(tr("Activation and unquantized weight type on the GPU."));
  form->addRow(tr("Data type:"), m_dtype);

  auto* utilRow = new QHBoxLayout;
  m_gpuUtil = new QSlider(Qt::Horizontal);
  m_gpuUtil->setObjectName(QStringLiteral("gpuMemoryUtilization"));
  m_gpuUtil->setRange(10, 100);  // percent
  m_gpuUtil->setPageStep(5);
  m_gpuUtil->setToolTip(
      tr("Share of GPU memory Lathe may use for weights, activations and KV cache."));
  m_gpuUtilLabel = new QLabel;
  m_gpuUtilLabel->setMinimumWidth(
      m_gpuUtilLabel->fontMetrics().horizontalAdvance(QStringLiteral("100 %")));
  utilRow->addWidget(m_gpuUtil, 1);
  utilRow->addWidget(m_gpuUtilLabel);
  form->addRow(tr("GPU memory utilization:"), utilRow);

  m_maxModelLen =
      makeSpin(1 << 20, 512, tr("Model's context"),
               tr("Tokens per sequence (prompt and output) the KV cache is planned for."));
  m_maxModelLen->setObjectName(QStringLiteral("maxModelLen"));
  form->addRow(tr("Max model length:"), m_maxModelLen);
  m_maxNumSeqs = makeSpin(4096, 8, tr("Device default"),
                          tr("Sequences scheduled together in one step (batch slots)."));
  m_maxNumSeqs->setObjectName(QStringLiteral("maxNumSeqs"));
  form->addRow(tr("Max sequences:"), m_maxNumSeqs);
  m_maxBatchedTokens = makeSpin(1 << 20, 256, tr("Device default"),
                                tr("Tokens computed in one step: prefill chunks plus decodes."));
  m_maxBatchedTokens->setObjectName(QStringLiteral("maxNumBatchedTokens"));
  form->addRow(tr("Max batched tokens:"), m_maxBatchedTokens);

  m_prefixCaching = new QCheckBox(tr("Reuse the KV cache of shared prompt prefixes"));
  m_prefixCaching->setObjectName(QStringLiteral("prefixCaching"));
  form->addRow(tr("Prefix caching:"), m_prefixCaching);

  m_scheduling = new QComboBox;
  m_scheduling->setObjectName(QStringLiteral("scheduling"));
  m_scheduling->addItem(tr("Continuous batching"), QStringLiteral("continuous"));
  m_scheduling->addItem(tr("Static batching"), QStringLiteral("static"));
  m_scheduling->setToolTip(
      tr("Static batching runs a batch until its longest member finishes; "
         "continuous batching refills free slots every step."));
  form->addRow(tr("Scheduling:"), m_scheduling);
  root->addLayout(form);

  connect(m_presetCombo, &QComboBox::activated, this,
          [this](int) { applyPreset(m_presetCombo->currentText()); });
  connect(m_saveButton, &QPushButton::clicked, this, &LoadSettingsWidget::askPresetName);
  connect(m_defaultButton, &QPushButton::clicked, this,
          &LoadSettingsWidget::setCurrentPresetAsDefault);
  connect(m_deleteButton, &QPushButton::clicked, this, &LoadSettingsWidget::deleteCurrentPreset);
  connect(m_device, &QComboBox::currentIndexChanged, this, &LoadSettingsWidget::onEdited);
  connect(m_dtype, &QComboBox::currentIndexChanged, this, &LoadSettingsWidget::onEdited);
  connect(m_gpuUtil, &QSlider::valueChanged, this, &LoadSettingsWidget::onEdited);
  connect(m_maxModelLen, &QSpinBox::valueChanged, this, &LoadSettingsWidget::onEdited);
  connect(m_maxNumSeqs, &QSpinBox::valueChanged, this, &LoadSettingsWidget::onEdited);
  connect(m_maxBatchedTokens, &QSpinBox::valueChanged, this, &LoadSettingsWidget::onEdited);
  connect(m_prefixCaching, &QCheckBox::toggled, this, &LoadSettingsWidget::onEdited);
  connect(m_scheduling, &QComboBox::currentIndexChanged, this, &LoadSettingsWidget::onEdited);
}

LoadSettings LoadSettingsWidget::settings() const {
  LoadSettings s;
  s.device = m_device->currentData().toString();
  s.dtype = m_dtype->currentData().toString();
  s.gpuMemoryUtilization = m_gpuUtil->value() / 100.0;
  s.maxModelLen = m_maxModelLen->value();
  s.maxNumSeqs = m_maxNumSeqs->value();
  s.maxNumBatchedTokens = m_maxBatchedTokens->value();
  s.enablePrefixCaching = m_prefixCaching->isChecked();
  s.scheduling = m_scheduling->currentData().toString();
  return s;
}

void LoadSettingsWidget::setSettings(const LoadSettings& s) {
  m_updating = true;
  selectData(m_device, s.device);
  selectData(m_dtype, s.dtype);
  m_gpuUtil->setValue(qRound(s.gpuMemoryUtilization * 100.0));
  m_maxModelLen->setValue(s.maxModelLen);
  m_maxNumSeqs->setValue(s.maxNumSeqs);
  m_maxBatchedTokens->setValue(s.maxNumBatchedTokens);
  m_prefixCaching->setChecked(s.enablePrefixCaching);
  selectData(m_scheduling, s.scheduling);
  m_updating = false;
  updateUtilLabel();
  emit settingsChanged(settings());
}

void LoadSettingsWidget::setGpuAvailable(bool available, const QString& gpuName) {
  auto* model = qobject_cast<QStandardItemModel*>(m_device->model());
  const int row = m_device->findData(QStringLiteral("cuda"));
  if (model != nullptr && row >= 0) {
    QStandardItem* item = model->item(row);
    item->setEnabled(available);
    item->setText(available ? tr("CUDA GPU (%1)").arg(gpuName) : tr("CUDA GPU (none detected)"));
  }
  if (!available && m_device->currentData().toString() == QLatin1String("cuda"))
    selectData(m_device, QStringLiteral("auto"));
}

QString LoadSettingsWidget::currentPresetName() const {
  return m_presetCombo->currentText();
}

bool LoadSettingsWidget::applyPreset(const QString& name) {
  if (!m_presets->contains(name)) return false;
  m_presetCombo->setCurrentIndex(m_presetCombo->findText(name));
  setSettings(m_presets->preset(name));
  m_presetStatus->clear();
  m_deleteButton->setEnabled(name != PresetStore::builtinName());
  return true;
}

bool LoadSettingsWidget::savePresetAs(const QString& name) {
  QString error;
  if (!m_presets->save(name, settings(), &error)) {
    m_presetStatus->setText(error);
    return false;
  }
  m_presetCombo->setCurrentIndex(m_presetCombo->findText(name.trimmed()));
  m_deleteButton->setEnabled(true);
  m_presetStatus->setText(tr("Saved preset \"%1\".").arg(name.trimmed()));
  return true;
}

void LoadSettingsWidget::setCurrentPresetAsDefault() {
  m_presets->setDefaultPreset(currentPresetName());
  m_presetStatus->setText(tr("\"%1\" is now the default preset.").arg(currentPresetName()));
}

void LoadSettingsWidget::setReadOnly(bool readOnly) {
  for (QWidget* w : {static_cast<QWidget*>(m_device), static_cast<QWidget*>(m_dtype),
                     static_cast<QWidget*>(m_gpuUtil), static_cast<QWidget*>(m_maxModelLen),
                     static_cast<QWidget*>(m_maxNumSeqs), static_cast<QWidget*>(m_maxBatchedTokens),
                     static_cast<QWidget*>(m_prefixCaching), static_cast<QWidget*>(m_scheduling),
                     static_cast<QWidget*>(m_presetCombo)})
    w->setEnabled(!readOnly);
}

void LoadSettingsWidget::refreshPresets() {
  const QString current = m_presetCombo->currentText();
  const QString def = m_presets->defaultPresetName();
  m_presetCombo->clear();
  for (const QString& name : m_presets->names()) m_presetCombo->addItem(name);
  const int i = m_presetCombo->findText(current);
  m_presetCombo->setCurrentIndex(i >= 0 ? i : m_presetCombo->findText(def));
  for (int row = 0; row < m_presetCombo->count(); ++row)
    m_presetCombo->setItemData(
        row, m_presetCombo->itemText(row) == def ? tr("Default preset") : QString(),
        Qt::ToolTipRole);
  m_deleteButton->setEnabled(m_presetCombo->currentText() != PresetStore::builtinName());
}

void LoadSettingsWidget::onEdited() {
  updateUtilLabel();
  if (m_updating) return;
  // The form no longer matches the selected preset: say so instead of pretending it does.
  if (settings() != m_presets->preset(currentPresetName()))
    m_presetStatus->setText(tr("Modified from \"%1\".").arg(currentPresetName()));
  else
    m_presetStatus->clear();
  emit settingsChanged(settings());
}

void LoadSettingsWidget::askPresetName() {
  bool ok = false;
  const QString name = QInputDialog::getText(this, tr("Save preset"), tr("Preset name:"),
                                             QLineEdit::Normal, QString(), &ok);
  if (ok) savePresetAs(name);
}

void LoadSettingsWidget::deleteCurrentPreset() {
  const QString name = currentPresetName();
  if (m_presets->remove(name)) applyPreset(m_presets->defaultPresetName());
}

void LoadSettingsWidget::updateUtilLabel() {
  m_gpuUtilLabel->setText(QStringLiteral("%1 %").arg(m_gpuUtil->value()));
}

}  // namespace lathe::ui
