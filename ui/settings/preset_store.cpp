#include "ui/settings/preset_store.h"

#include <QSettings>

namespace lathe::ui {

namespace {
const QString kGroup = QStringLiteral("presets");
const QString kDefaultKey = QStringLiteral("presetDefault");
}  // namespace

PresetStore::PresetStore(QSettings* settings, QObject* parent)
    : QObject(parent), m_settings(settings) {
  if (m_settings == nullptr) {
    m_settings = new QSettings();
    m_ownsSettings = true;
  }
}

PresetStore::~PresetStore() {
  if (m_ownsSettings) delete m_settings;
}

QString PresetStore::builtinName() {
  return QStringLiteral("Default");
}

QStringList PresetStore::names() const {
  m_settings->beginGroup(kGroup);
  QStringList saved = m_settings->childGroups();
  m_settings->endGroup();
  saved.removeAll(builtinName());
  saved.sort(Qt::CaseInsensitive);
  saved.prepend(builtinName());
  return saved;
}

bool PresetStore::contains(const QString& name) const {
  return names().contains(name);
}

LoadSettings PresetStore::preset(const QString& name) const {
  if (name == builtinName() || !contains(name)) return LoadSettings{};
  QVariantMap map;
  m_settings->beginGroup(kGroup + QLatin1Char('/') + name);
  for (const QString& key : m_settings->childKeys()) map.insert(key, m_settings->value(key));
  m_settings->endGroup();
  return LoadSettings::fromVariantMap(map);
}

bool PresetStore::save(const QString& name, const LoadSettings& settings, QString* error) {
  const QString trimmed = name.trimmed();
  if (trimmed.isEmpty() || trimmed.contains(QLatin1Char('/')) ||
      trimmed.contains(QLatin1Char('\\'))) {
    if (error) *error = tr("A preset needs a name without slashes.");
    return false;
  }
  if (trimmed == builtinName()) {
    if (error) *error = tr("\"%1\" is the built-in preset; choose another name.").arg(trimmed);
    return false;
  }
  const QString group = kGroup + QLatin1Char('/') + trimmed;
  m_settings->remove(group);
  m_settings->beginGroup(group);
  const QVariantMap map = settings.toVariantMap();
  for (auto it = map.cbegin(); it != map.cend(); ++it) m_settings->setValue(it.key(), it.value());
  m_settings->endGroup();
  m_settings->sync();
  emit presetsChanged();
  return true;
}

bool PresetStore::remove(const QString& name) {
  if (name == builtinName() || !contains(name)) return false;
  m_settings->remove(kGroup + QLatin1Char('/') + name);
  if (defaultPresetName() == name) m_settings->remove(kDefaultKey);
  m_settings->sync();
  emit presetsChanged();
  return true;
}

QString PresetStore::defaultPresetName() const {
  const QString name = m_settings->value(kDefaultKey).toString();
  return contains(name) ? name : builtinName();
}

void PresetStore::setDefaultPreset(const QString& name) {
  if (!contains(name)) return;
  m_settings->setValue(kDefaultKey, name);
  m_settings->sync();
  emit presetsChanged();
}

}  // namespace lathe::ui
