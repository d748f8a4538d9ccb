// Named load-settings presets kept in QSettings ("presets/<name>"), plus which one is the default
// (applied when a model is opened). The built-in preset "Default" (engine defaults) always exists
// and cannot be removed or overwritten.
#pragma once

#include <QObject>
#include <QStringList>

#include "ui/settings/load_settings.h"

class QSettings;

namespace lathe::ui {

class PresetStore : public QObject {
  Q_OBJECT
 public:
  // settings: where presets live (the application's QSettings when null). Not owned.
  explicit PresetStore(QSettings* settings = nullptr, QObject* parent = nullptr);
  ~PresetStore() override;

  static QString builtinName();  // "Default"

  QStringList names() const;  // built-in first, then saved ones sorted
  bool contains(const QString& name) const;
  LoadSettings preset(const QString& name) const;  // the built-in one for unknown names

  // Saves (or replaces) a preset. Fails (returns false, with *error) for an empty name or the
  // built-in name.
  bool save(const QString& name, const LoadSettings& settings, QString* error = nullptr);
  bool remove(const QString& name);

  QString defaultPresetName() const;  // the built-in one unless another was chosen
  void setDefaultPreset(const QString& name);
  LoadSettings defaultPreset() const { return preset(defaultPresetName()); }

 signals:
  void presetsChanged();

 private:
  QSettings* m_settings;
  bool m_ownsSettings = false;
};

}  // namespace lathe::ui
