// One choice's reply when a chat request uses tools: content goes out as long as no call can have
// begun; what may be a call is held back and parsed at the end (tool_calls.h). Used by the HTTP
// handler (per choice, streaming or not) and by in-process clients (in_process_chat.h).
#pragma once

#include <string>
#include <vector>

#include "engine/server/openai_request.h"
#include "engine/server/tool_calls.h"

namespace lathe {

class ToolReply {
 public:
  ToolReply(const OpenAiRequest& r, ToolSyntax syntax);

  // Appends `text`; returns the part of the text so far that is surely content and not returned
  // yet.
  std::string feed(const std::string& text);
  // At the end: the rest of the content and the calls.
  ParsedReply finish();

 private:
  ToolSyntax syntax_;
  bool forced_;
  std::string named_;
  std::vector<std::string> names_;
  std::string held_;
  bool sent_any_ = false;
};

}  // namespace lathe
