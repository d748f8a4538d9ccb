#include "ui/chat/conversation_store.h"

#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QSaveFile>
#include <QStandardPaths>

#include <algorithm>

namespace lathe::ui {

namespace {
bool isValidId(const QString& id) {
  // Ids become file names: allow only what Conversation::create() produces (hex and dashes).
  if (id.isEmpty() || id.size() > 64) return false;
  return std::all_of(id.cbegin(), id.cend(), [](QChar ch) {
    return ch.isDigit() || (ch >= u'a' && ch <= u'f') || (ch >= u'A' && ch <= u'F') || ch == u'-';
  });
}
}  // namespace

ConversationStore::ConversationStore(const QString& folder, QObject* parent)
    : QAbstractListModel(parent), m_folder(folder) {
  if (m_folder.isEmpty())
    m_folder = QStandardPaths::writableLocation(QStandardPaths::AppDataLocation) +
               QStringLiteral("/conversations");
  reload();
}

QString ConversationStore::pathFor(const QString& id) const {
  return m_folder + QLatin1Char('/') + id + QStringLiteral(".json");
}

void ConversationStore::reload() {
  beginResetModel();
  m_entries.clear();
  const QDir dir(m_folder);
  const QStringList files = dir.entryList({QStringLiteral("*.json")}, QDir::Files);
  QStringList setAside;
  const QString stamp = QDateTime::currentDateTime().toString(QStringLiteral("yyyyMMdd-HHmmss"));
  for (const QString& file : files) {
    Conversation c;
    const QString id = file.chopped(5);
    if (isValidId(id) && load(id, &c)) {
      m_entries.push_back({c.id, c.title, c.updated});
      continue;
    }
    // Unreadable (torn by another program, edited by hand, a foreign file): renamed aside, so it
    // is neither lost nor read again, and reported.
    const QString why = isValidId(id) ? m_lastError : tr("not a conversation file name");
    QString aside = dir.filePath(file + QStringLiteral(".corrupt-") + stamp);
    for (int n = 1; QFile::exists(aside); ++n)
      aside = dir.filePath(file + QStringLiteral(".corrupt-%1-%2").arg(stamp).arg(n));
    if (QFile::rename(dir.filePath(file), aside))
      setAside << tr("%1 (%2; kept as %3)").arg(file, why, QFileInfo(aside).fileName());
    else
      setAside << tr("%1 (%2; could not be renamed)").arg(file, why);
  }
  sortEntries();
  endResetModel();
  m_lastError = setAside.isEmpty() ? QString()
                                   : tr("Unreadable conversation files in %1 were set aside: %2")
                                         .arg(m_folder, setAside.join(QStringLiteral("; ")));
}

void ConversationStore::sortEntries() {
  std::stable_sort(m_entries.begin(), m_entries.end(),
                   [](const Entry& a, const Entry& b) { return a.updated > b.updated; });
}

bool ConversationStore::writeFile(const Conversation& c) {
  if (!isValidId(c.id)) {
    m_lastError = tr("Invalid conversation id \"%1\"").arg(c.id);
    return false;
  }
  if (!QDir().mkpath(m_folder)) {
    m_lastError = tr("Cannot create the conversations folder %1").arg(m_folder);
    return false;
  }
  QSaveFile file(pathFor(c.id));
  if (!file.open(QIODevice::WriteOnly)) {
    m_lastError = tr("Cannot write %1: %2").arg(file.fileName(), file.errorString());
    return false;
  }
  file.write(QJsonDocument(c.toJson()).toJson(QJsonDocument::Indented));
  if (!file.commit()) {
    m_lastError = tr("Cannot write %1: %2").arg(file.fileName(), file.errorString());
    return false;
  }
  return true;
}

bool ConversationStore::save(const Conversation& c) {
  if (!writeFile(c)) return false;
  const int row = indexOf(c.id);
  if (row >= 0) {
    beginRemoveRows({}, row, row);
    m_entries.removeAt(row);
    endRemoveRows();
  }
  beginInsertRows({}, 0, 0);
  m_entries.prepend({c.id, c.title, c.updated});
  endInsertRows();
  return true;
}

bool ConversationStore::load(const QString& id, Conversation* out) {
  if (!isValidId(id)) {
    m_lastError = tr("Invalid conversation id \"%1\"").arg(id);
    return false;
  }
  QFile file(pathFor(id));
  if (!file.open(QIODevice::ReadOnly)) {
    m_lastError = tr("Cannot open %1: %2").arg(file.fileName(), file.errorString());
    return false;
  }
  QJsonParseError parseError;
  const QJsonDocument doc = QJsonDocument::fromJson(file.readAll(), &parseError);
  if (doc.isNull() || !doc.isObject()) {
    m_lastError = tr("%1: not valid JSON (%2)").arg(file.fileName(), parseError.errorString());
    return false;
  }
  QString why;
  if (!Conversation::fromJson(doc.object(), out, &why)) {
    m_lastError = tr("%1: %2").arg(file.fileName(), why);
    return false;
  }
  return true;
}

bool ConversationStore::rename(const QString& id, const QString& title) {
  Conversation c;
  const QString trimmed = title.trimmed();
  if (trimmed.isEmpty() || !load(id, &c)) return false;
  c.title = trimmed;
  if (!writeFile(c)) return false;
  const int row = indexOf(id);
  if (row >= 0) {
    m_entries[row].title = trimmed;
    emit dataChanged(index(row), index(row));
  }
  emit renamed(id, trimmed);
  return true;
}

bool ConversationStore::remove(const QString& id) {
  const int row = indexOf(id);
  if (!isValidId(id) || !QFile::remove(pathFor(id))) {
    m_lastError = tr("Cannot delete conversation \"%1\"").arg(id);
    return false;
  }
  if (row >= 0) {
    beginRemoveRows({}, row, row);
    m_entries.removeAt(row);
    endRemoveRows();
  }
  return true;
}

int ConversationStore::indexOf(const QString& id) const {
  for (int i = 0; i < m_entries.size(); ++i)
    if (m_entries[i].id == id) return i;
  return -1;
}

QString ConversationStore::idAt(int row) const {
  return row >= 0 && row < m_entries.size() ? m_entries[row].id : QString();
}

int ConversationStore::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_entries.size());
}

QVariant ConversationStore::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= m_entries.size()) return {};
  const Entry& e = m_entries[index.row()];
  switch (role) {
    case Qt::DisplayRole:
    case Qt::EditRole:
      return e.title.isEmpty() ? tr("Untitled") : e.title;
    case Qt::ToolTipRole:
      return tr("%1\nLast changed %2")
          .arg(e.title, QLocale().toString(e.updated.toLocalTime(), QLocale::ShortFormat));
    case IdRole:
      return e.id;
    case UpdatedRole:
      return e.updated;
    default:
      return {};
  }
}

bool ConversationStore::setData(const QModelIndex& index, const QVariant& value, int role) {
  if (!index.isValid() || role != Qt::EditRole) return false;
  return rename(m_entries[index.row()].id, value.toString());
}

Qt::ItemFlags ConversationStore::flags(const QModelIndex& index) const {
  return QAbstractListModel::flags(index) |
         (index.isValid() ? Qt::ItemIsEditable : Qt::NoItemFlags);
}

}  // namespace lathe::ui
