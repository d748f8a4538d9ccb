// A chat conversation as Lathe Studio keeps it: system prompt, sampling settings and messages, each
// assistant reply with the stats it was produced with. Saved as one JSON file per conversation
// (ConversationStore). Plain data; no engine types.
#pragma once

#include <QDateTime>
#include <QJsonObject>
#include <QString>
#include <QVector>

#include <optional>

#include "ui/bridge/bridge_types.h"

namespace lathe::ui {

struct ChatMessage {
  QString role;  // "user" or "assistant"
  QString content;
  std::optional<GenerationStats> stats;  // assistant replies that finished
};

struct Conversation {
  QString id;     // file stem, a UUID without braces
  QString title;  // shown in the list; the first user message until renamed
  QDateTime created;
  QDateTime updated;
  QString systemPrompt;
  SamplingSettings sampling;
  QString modelName;  // the model that wrote the replies (informative)
  QVector<ChatMessage> messages;

  static Conversation create();  // new id, timestamps now, empty messages

  // The turns sent to the engine: the system prompt (when set), then every message.
  QVector<ChatTurn> turns() const;

  QJsonObject toJson() const;
  // Reads what toJson() wrote; false (with *error) for missing fields or wrong types.
  static bool fromJson(const QJsonObject& json, Conversation* out, QString* error);
};

}  // namespace lathe::ui
