#include "engine/server/tool_reply.h"

namespace lathe {

ToolReply::ToolReply(const OpenAiRequest& r, ToolSyntax syntax)
    : syntax_(syntax),
      forced_(r.tool_choice == ToolChoice::kRequired || r.tool_choice == ToolChoice::kNamed),
      named_(r.tool_choice == ToolChoice::kNamed ? r.tool_choice_name : std::string()),
      names_(r.tool_names) {}

std::string ToolReply::feed(const std::string& text) {
  held_ += text;
  size_t safe = 0;
  if (!forced_)
    safe = syntax_ == ToolSyntax::kLlama3 && sent_any_ ? held_.size()
                                                       : tool_call_safe_prefix(syntax_, held_);
  std::string out = held_.substr(0, safe);
  held_.erase(0, safe);
  sent_any_ |= !out.empty();
  return out;
}

ParsedReply ToolReply::finish() {
  if (!forced_) return parse_tool_calls(syntax_, held_, names_);
  ParsedReply r;
  r.calls = parse_forced_calls(held_, named_);
  if (r.calls.empty()) r.content = held_;  // cut short: no complete call
  return r;
}

}  // namespace lathe
