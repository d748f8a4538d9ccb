// Sampling controls of the chat panel: temperature, top-p, top-k, min-p, repetition penalty,
// max tokens and an optional seed. Emits changed() on every edit.
#pragma once

#include <QWidget>

#include "ui/bridge/bridge_types.h"

class QCheckBox;
class QDoubleSpinBox;
class QSpinBox;
class QLineEdit;

namespace lathe::ui {

class SamplingControls : public QWidget {
  Q_OBJECT
 public:
  explicit SamplingControls(QWidget* parent = nullptr);

  SamplingSettings settings() const;
  void setSettings(const SamplingSettings& settings);

 signals:
  void changed(const lathe::ui::SamplingSettings& settings);

 private:
  void emitChanged();

  bool m_updating = false;
  QDoubleSpinBox* m_temperature = nullptr;
  QDoubleSpinBox* m_topP = nullptr;
  QSpinBox* m_topK = nullptr;
  QDoubleSpinBox* m_minP = nullptr;
  QDoubleSpinBox* m_repetition = nullptr;
  QSpinBox* m_maxTokens = nullptr;
  QCheckBox* m_useSeed = nullptr;
  QLineEdit* m_seed = nullptr;
};

}  // namespace lathe::ui
