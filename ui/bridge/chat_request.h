// The Studio chat's requests in the server's terms: the output settings checked by the server's
// own code (so an invalid schema or tool list shows the message its 400 would carry), and a
// GenerationRequest written as an OpenAI chat request body for the in-process request path
// (engine/server/in_process_chat.h). No engine types in this header.
#pragma once

#include <QByteArray>
#include <QString>

#include "ui/bridge/bridge_types.h"

namespace lathe::ui {

// Which editor a problem belongs to.
enum class ChatOutputField { kNone, kJsonSchema, kTools };

struct ChatOutputProblem {
  ChatOutputField field = ChatOutputField::kNone;
  QString message;  // the server's message, e.g. "response_format: schema at /: unsupported ..."
  bool isOk() const { return field == ChatOutputField::kNone; }
};

// Checks `settings` without a model (safe on the GUI thread; a large schema takes milliseconds).
ChatOutputProblem checkChatOutput(const ChatOutputSettings& settings);

// `request`'s messages and output settings as the JSON text of a chat completion request
// (sampling is set on the prepared request directly).
QByteArray chatRequestBody(const GenerationRequest& request);

// Arguments JSON text, indented two spaces per level with its members in the written order (text
// that is not JSON comes back unchanged).
QString prettyJson(const QString& json);

}  // namespace lathe::ui
