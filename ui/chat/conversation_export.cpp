#include "ui/chat/conversation_export.h"

#include <QDir>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSaveFile>

#include "ui/chat/conversation_store.h"

namespace lathe::ui {

QByteArray conversationsToChatJsonl(const QVector<Conversation>& conversations, int* written) {
  QByteArray out;
  int lines = 0;
  for (const Conversation& c : conversations) {
    QJsonArray messages;
    bool hasText = false;
    for (const ChatTurn& t : c.turns()) {
      // Text only: tool results (and calls) are not prose for calibration.
      if (t.content.trimmed().isEmpty() || t.role == QLatin1String("tool")) continue;
      hasText = hasText || t.role != QLatin1String("system");
      messages.append(QJsonObject{{"role", t.role}, {"content", t.content}});
    }
    if (!hasText) continue;
    out += QJsonDocument(QJsonObject{{"messages", messages}}).toJson(QJsonDocument::Compact);
    out += '\n';
    ++lines;
  }
  if (written) *written = lines;
  return out;
}

bool exportConversationsAsChatJsonl(ConversationStore* store, const QString& path, int* written,
                                    QString* error) {
  QVector<Conversation> conversations;
  for (int row = 0; row < store->rowCount(); ++row) {
    Conversation c;
    if (store->load(store->idAt(row), &c)) conversations.push_back(c);
  }
  int lines = 0;
  const QByteArray bytes = conversationsToChatJsonl(conversations, &lines);
  if (written) *written = lines;
  if (lines == 0) {
    if (error)
      *error = QObject::tr(
          "No saved conversation has any text yet. Chat with a model on the Chat page (every "
          "conversation is saved), or choose the built-in set or a file.");
    return false;
  }
  QSaveFile file(path);
  if (!QDir().mkpath(QFileInfo(path).absolutePath()) || !file.open(QIODevice::WriteOnly) ||
      file.write(bytes) != bytes.size() || !file.commit()) {
    if (error)
      *error =
          QObject::tr("Cannot write the conversations to %1: %2").arg(path, file.errorString());
    return false;
  }
  return true;
}

}  // namespace lathe::ui
