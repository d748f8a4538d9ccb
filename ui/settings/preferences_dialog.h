// Edit ▸ Preferences: what happens at startup, CPU threads for the CPU backend, the default load
// preset, light / dark / system appearance, and where conversations are saved. Values live in
// QSettings (keys below).
#pragma once

#include <QDialog>

#include "ui/settings/appearance.h"

class QComboBox;
class QSpinBox;

namespace lathe::ui {

class PresetStore;

struct Preferences {
  enum class Startup { kDefaultModel, kLastModel, kNothing };
  Startup startup = Startup::kDefaultModel;     // "startup/model": default | last | none
  int cpuThreads = 0;                           // "engine/cpuThreads": 0 = all cores but one
  Appearance appearance = Appearance::kSystem;  // "appearance": system | light | dark

  static Preferences load();
  void save() const;
};

class PreferencesDialog : public QDialog {
  Q_OBJECT
 public:
  PreferencesDialog(PresetStore* presets, const QString& conversationsFolder,
                    QWidget* parent = nullptr);
  Preferences preferences() const;

 private:
  PresetStore* m_presets;
  QComboBox* m_startup = nullptr;
  QSpinBox* m_threads = nullptr;
  QComboBox* m_defaultPreset = nullptr;
  QComboBox* m_appearance = nullptr;
};

}  // namespace lathe::ui
