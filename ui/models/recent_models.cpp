#include "ui/models/recent_models.h"

#include <QFileInfo>
#include <QPalette>
#include <QSettings>

namespace lathe::ui {

namespace {
const QString kKey = QStringLiteral("recentModels");
}

RecentModels::RecentModels(QSettings* settings, QObject* parent)
    : QAbstractListModel(parent), m_settings(settings) {
  if (m_settings == nullptr) {
    m_settings = new QSettings();
    m_ownsSettings = true;
  }
  m_paths = m_settings->value(kKey).toStringList();
  m_paths.removeAll(QString());
  m_paths.removeDuplicates();
  while (m_paths.size() > kMaxEntries) m_paths.removeLast();
}

RecentModels::~RecentModels() {
  if (m_ownsSettings) delete m_settings;
}

void RecentModels::add(const QString& path) {
  const QString clean = QFileInfo(path).absoluteFilePath();
  beginResetModel();
  m_paths.removeAll(clean);
  m_paths.prepend(clean);
  while (m_paths.size() > kMaxEntries) m_paths.removeLast();
  endResetModel();
  persist();
}

void RecentModels::remove(const QString& path) {
  const int row = static_cast<int>(m_paths.indexOf(path));
  if (row < 0) return;
  beginRemoveRows({}, row, row);
  m_paths.removeAt(row);
  endRemoveRows();
  persist();
}

void RecentModels::clear() {
  beginResetModel();
  m_paths.clear();
  endResetModel();
  persist();
}

void RecentModels::persist() {
  m_settings->setValue(kKey, m_paths);
  m_settings->sync();
}

int RecentModels::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_paths.size());
}

QVariant RecentModels::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= m_paths.size()) return {};
  const QString& path = m_paths[index.row()];
  const QFileInfo info(path);
  switch (role) {
    case Qt::DisplayRole:
      return info.exists() ? info.fileName() : tr("%1 (missing)").arg(info.fileName());
    case Qt::ToolTipRole:
      return info.exists() ? path : tr("%1\nNo longer exists.").arg(path);
    case Qt::ForegroundRole:
      return info.exists() ? QVariant()
                           : QVariant(QPalette().brush(QPalette::Disabled, QPalette::Text));
    case PathRole:
      return path;
    case ExistsRole:
      return info.exists();
    default:
      return {};
  }
}

}  // namespace lathe::ui
