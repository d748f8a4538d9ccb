// The load settings form (device, dtype, GPU memory utilization, max-model-len, max-num-seqs,
// max-num-batched-tokens, prefix caching, scheduling) with a preset bar: pick a preset, save the
// current values as a preset, make one the default, delete one. Emits settingsChanged() for every
// edit so the model card's memory plan follows the form.
#pragma once

#include <QWidget>

#include "ui/settings/load_settings.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QPushButton;
class QSlider;
class QSpinBox;

namespace lathe::ui {

class PresetStore;

class LoadSettingsWidget : public QWidget {
  Q_OBJECT
 public:
  // presets: not owned; must outlive the widget.
  explicit LoadSettingsWidget(PresetStore* presets, QWidget* parent = nullptr);

  LoadSettings settings() const;
  void setSettings(const LoadSettings& settings);

  // Whether a CUDA device can be chosen; its name shows in the device list.
  void setGpuAvailable(bool available, const QString& gpuName);

  QString currentPresetName() const;
  // Applies a saved preset to the form; false for an unknown name.
  bool applyPreset(const QString& name);
  // Saves the form as `name` (asks nothing). false with a message on the status line otherwise.
  bool savePresetAs(const QString& name);
  void setCurrentPresetAsDefault();
  void setReadOnly(bool readOnly);  // while a model is loaded or loading

 signals:
  void settingsChanged(const lathe::ui::LoadSettings& settings);

 private:
  void buildForm();
  void refreshPresets();
  void onEdited();
  void askPresetName();
  void deleteCurrentPreset();
  void updateUtilLabel();

  PresetStore* m_presets;
  bool m_updating = false;
  QComboBox* m_presetCombo = nullptr;
  QPushButton* m_saveButton = nullptr;
  QPushButton* m_defaultButton = nullptr;
  QPushButton* m_deleteButton = nullptr;
  QLabel* m_presetStatus = nullptr;
  QComboBox* m_device = nullptr;
  QComboBox* m_dtype = nullptr;
  QSlider* m_gpuUtil = nullptr;
  QLabel* m_gpuUtilLabel = nullptr;
  QSpinBox* m_maxModelLen = nullptr;
  QSpinBox* m_maxNumSeqs = nullptr;
  QSpinBox* m_maxBatchedTokens = nullptr;
  QCheckBox* m_prefixCaching = nullptr;
  QComboBox* m_scheduling = nullptr;
};

}  // namespace lathe::ui
