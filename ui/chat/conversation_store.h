// Saved conversations: one JSON file per conversation in <app data>/conversations, exposed as a
// list model (newest first) for the chat panel's sidebar. Editing a row's title renames the
// conversation. Files are written atomically (QSaveFile: temporary, fsync, rename), so a crash
// leaves the previous or the new version. Files that cannot be read are renamed aside
// ("<id>.json.corrupt-<date>") and reported through lastError(), never dropped, never fatal.
#pragma once

#include <QAbstractListModel>
#include <QDateTime>
#include <QVector>

#include "ui/chat/conversation.h"

namespace lathe::ui {

class ConversationStore : public QAbstractListModel {
  Q_OBJECT
 public:
  enum Role { IdRole = Qt::UserRole + 1, UpdatedRole };

  // folder: where the JSON files live; empty = <AppDataLocation>/conversations. Created on demand.
  explicit ConversationStore(const QString& folder = QString(), QObject* parent = nullptr);

  QString folder() const { return m_folder; }
  QString lastError() const { return m_lastError; }

  // Re-reads the folder.
  void reload();

  // Writes the conversation (creating or replacing its file) and moves it to the top.
  bool save(const Conversation& conversation);
  // Reads one conversation; false with lastError() when its file is missing or malformed.
  bool load(const QString& id, Conversation* out);
  bool rename(const QString& id, const QString& title);
  bool remove(const QString& id);

  int indexOf(const QString& id) const;  // row or -1
  QString idAt(int row) const;

  int rowCount(const QModelIndex& parent = QModelIndex()) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  bool setData(const QModelIndex& index, const QVariant& value, int role) override;
  Qt::ItemFlags flags(const QModelIndex& index) const override;

 signals:
  // A conversation got a new title (through rename() or by editing its row).
  void renamed(const QString& id, const QString& title);

 private:
  struct Entry {
    QString id;
    QString title;
    QDateTime updated;
  };
  QString pathFor(const QString& id) const;
  bool writeFile(const Conversation& c);
  void sortEntries();

  QString m_folder;
  QString m_lastError;
  QVector<Entry> m_entries;  // newest first
};

}  // namespace lathe::ui
