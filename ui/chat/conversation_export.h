// Saved conversations as chat JSONL, the format the quantizer's calibration loader reads
// (engine/quant/calibration.h): one line per conversation, {"messages": [{"role", "content"}…]},
// with the system prompt first when there is one. The quantization wizard uses it to calibrate
// GPTQ/AWQ on the text the user actually chats about.
#pragma once

#include <QByteArray>
#include <QString>
#include <QVector>

#include "ui/chat/conversation.h"

namespace lathe::ui {

class ConversationStore;

// One line per conversation that has at least one message with text (empty messages, such as a
// reply that was stopped before its first token, are left out). *written: the lines written.
QByteArray conversationsToChatJsonl(const QVector<Conversation>& conversations,
                                    int* written = nullptr);

// Reads every conversation of `store` and writes them to `path` atomically (QSaveFile; the folder
// is created). Conversations that cannot be read are skipped. False with *error when there is
// nothing to write (no saved conversation has text) or the file cannot be written. Reads one file
// per conversation: meant for a user's action, not a timer.
bool exportConversationsAsChatJsonl(ConversationStore* store, const QString& path, int* written,
                                    QString* error);

}  // namespace lathe::ui
