#include "engine/server/tool_calls.h"
#include "engine/server/json_nesting.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>

#include "engine/grammar/json_schema_regex.h"

namespace lathe {
namespace {

using json = nlohmann::json;

constexpr const char* kHermesOpen = "<tool_call>";
constexpr const char* kHermesClose = "</tool_call>";
constexpr const char* kMistralMarker = "[TOOL_CALLS]";
constexpr const char* kPythonTag = "<|python_tag|>";

// End of the JSON object or array starting at text[pos] ('{' or '['), or npos when unbalanced.
size_t json_end(const std::string& text, size_t pos) {
  JsonNesting nesting;
  for (size_t i = pos; i < text.size(); ++i)
    if (nesting.feed(text[i]) == 0) return i + 1;
  return std::string::npos;
}

size_t skip_space(const std::string& t, size_t i) {
  while (i < t.size() && (t[i] == ' ' || t[i] == '\n' || t[i] == '\t' || t[i] == '\r')) ++i;
  return i;
}

// A call object {"name": ..., "arguments"|"parameters": {...}} naming a known function.
bool call_from_json(const json& j, const std::vector<std::string>& names, ToolCall* out) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
  const std::string name = j["name"].get<std::string>();
  if (std::find(names.begin(), names.end(), name) == names.end()) return false;
  json args = json::object();
  for (const char* k : {"arguments", "parameters"}) {
    if (!j.contains(k)) continue;
    args = j[k];
    if (args.is_string()) {  // some models write the arguments as JSON text
      try {
        args = json::parse(args.get<std::string>());
      } catch (const json::exception&) {
        return false;
      }
    }
  }
  if (!args.is_object()) return false;
  out->id = new_tool_call_id();
  out->name = name;
  out->arguments = args.dump(-1, ' ', false, json::error_handler_t::replace);
  return true;
}

// Parses the JSON value at text[pos]; false when there is none.
bool json_at(const std::string& text, size_t pos, json* out, size_t* end) {
  if (pos >= text.size() || (text[pos] != '{' && text[pos] != '[')) return false;
  const size_t e = json_end(text, pos);
  if (e == std::string::npos) return false;
  try {
    *out = json::parse(text.substr(pos, e - pos));
  } catch (const json::exception&) {
    return false;
  }
  *end = e;
  return true;
}

ParsedReply parse_hermes(const std::string& text, const std::vector<std::string>& names) {
  ParsedReply r;
  size_t pos = 0;
  for (;;) {
    const size_t open = text.find(kHermesOpen, pos);
    if (open == std::string::npos) break;
    const size_t body = skip_space(text, open + std::string(kHermesOpen).size());
    json j;
    size_t end = 0;
    ToolCall call;
    if (!json_at(text, body, &j, &end) || !call_from_json(j, names, &call)) break;
    r.content += text.substr(pos, open - pos);
    r.calls.push_back(std::move(call));
    pos = skip_space(text, end);
    if (text.compare(pos, std::string(kHermesClose).size(), kHermesClose) == 0)
      pos += std::string(kHermesClose).size();
    pos = skip_space(text, pos);
  }
  r.content += text.substr(pos);
  return r;
}

ParsedReply parse_llama3(const std::string& text, const std::vector<std::string>& names) {
  ParsedReply r;
  size_t pos = skip_space(text, 0);
  if (text.compare(pos, std::string(kPythonTag).size(), kPythonTag) == 0)
    pos = skip_space(text, pos + std::string(kPythonTag).size());
  std::vector<ToolCall> calls;
  for (;;) {
    json j;
    size_t end = 0;
    ToolCall call;
    if (!json_at(text, pos, &j, &end) || !call_from_json(j, names, &call)) break;
    calls.push_back(std::move(call));
    pos = skip_space(text, end);
    if (pos < text.size() && text[pos] == ';') pos = skip_space(text, pos + 1);
  }
  // The reply is calls only, or it is content.
  if (calls.empty() || pos != text.size()) return ParsedReply{text, {}};
  r.calls = std::move(calls);
  return r;
}

ParsedReply parse_mistral(const std::string& text, const std::vector<std::string>& names) {
  const size_t m = text.find(kMistralMarker);
  if (m == std::string::npos) return ParsedReply{text, {}};
  ParsedReply r;
  r.content = text.substr(0, m);
  size_t pos = skip_space(text, m + std::string(kMistralMarker).size());
  json j;
  size_t end = 0;
  if (json_at(text, pos, &j, &end)) {
    const json list = j.is_array() ? j : json::array({j});
    for (const json& c : list) {
      ToolCall call;
      if (!call_from_json(c, names, &call)) return ParsedReply{text, {}};
      r.calls.push_back(std::move(call));
    }
    r.content += text.substr(end);
    return r;
  }
  // [TOOL_CALLS]name[ARGS]{...}
  const size_t args = text.find("[ARGS]", pos);
  if (args == std::string::npos) return ParsedReply{text, {}};
  json call_json = {{"name", text.substr(pos, args - pos)}};
  if (!json_at(text, args + 6, &j, &end)) return ParsedReply{text, {}};
  call_json["arguments"] = j;
  ToolCall call;
  if (!call_from_json(call_json, names, &call)) return ParsedReply{text, {}};
  r.calls.push_back(std::move(call));
  r.content += text.substr(end);
  return r;
}

// Length of the longest suffix of `text` that is a proper prefix of `marker`.
size_t partial_marker(const std::string& text, const std::string& marker) {
  for (size_t len = std::min(text.size(), marker.size() - 1); len > 0; --len)
    if (text.compare(text.size() - len, len, marker, 0, len) == 0) return len;
  return 0;
}

}  // namespace

ToolSyntax tool_syntax_of(const std::string& src) {
  if (src.find(kMistralMarker) != std::string::npos) return ToolSyntax::kMistral;
  if (src.find(kHermesOpen) != std::string::npos) return ToolSyntax::kHermes;
  if (src.find(kPythonTag) != std::string::npos ||
      (src.find("tools") != std::string::npos && src.find("\"parameters\"") != std::string::npos))
    return ToolSyntax::kLlama3;
  return ToolSyntax::kGeneric;
}

const char* tool_syntax_name(ToolSyntax s) {
  switch (s) {
    case ToolSyntax::kHermes:
      return "hermes";
    case ToolSyntax::kLlama3:
      return "llama3_json";
    case ToolSyntax::kMistral:
      return "mistral";
    case ToolSyntax::kGeneric:
      return "generic";
  }
  return "generic";
}

ParsedReply parse_tool_calls(ToolSyntax syntax, const std::string& text,
                             const std::vector<std::string>& names) {
  switch (syntax) {
    case ToolSyntax::kLlama3:
      return parse_llama3(text, names);
    case ToolSyntax::kMistral:
      return parse_mistral(text, names);
    case ToolSyntax::kHermes:
    case ToolSyntax::kGeneric:
      return parse_hermes(text, names);
  }
  return ParsedReply{text, {}};
}

size_t tool_call_safe_prefix(ToolSyntax syntax, const std::string& text) {
  if (syntax == ToolSyntax::kLlama3) {
    // Calls are the whole reply: hold everything once it starts like JSON or the python tag.
    const size_t p = skip_space(text, 0);
    if (p == text.size()) return 0;
    if (text[p] == '{' ||
        text.compare(p, std::string::npos, kPythonTag, 0,
                     std::min(text.size() - p, std::string(kPythonTag).size())) == 0)
      return 0;
    return text.size();
  }
  const std::string marker = syntax == ToolSyntax::kMistral ? kMistralMarker : kHermesOpen;
  const size_t found = text.find(marker);
  if (found != std::string::npos) return found;
  return text.size() - partial_marker(text, marker);
}

Result<std::string> forced_call_regex(const nlohmann::ordered_json& tools, const std::string& named,
                                      int max_calls) {
  std::vector<std::string> options;
  for (const nlohmann::ordered_json& t : tools) {
    const nlohmann::ordered_json& f = t["function"];
    const std::string name = f["name"].get<std::string>();
    const nlohmann::ordered_json params =
        f.contains("parameters")
            ? f["parameters"]
            : nlohmann::ordered_json{{"type", "object"},
                                     {"properties", nlohmann::ordered_json::object()}};
    Result<std::string> r = json_schema_to_regex(params);
    if (!r.is_ok())
      return invalid_argument("the parameters of function " + name + ": " + r.status().message());
    if (!named.empty()) {
      if (name == named) return r.value();
      continue;
    }
    nlohmann::ordered_json key = name;
    std::string escaped;
    for (const char c : key.dump()) {
      if (std::string("\\^$.|?*+()[]{}/-").find(c) != std::string::npos) escaped += '\\';
      escaped += c;
    }
    options.push_back(R"(\{"name":[ ]?)" + escaped + R"(,[ ]?"parameters":[ ]?()" + r.value() +
                      R"()\})");
  }
  if (!named.empty()) return invalid_argument("no tool is named " + named);
  std::string one = "(";
  for (size_t i = 0; i < options.size(); ++i) one += (i ? "|(" : "(") + options[i] + ")";
  one += ")";
  return "\\[" + one + "(,[ ]?" + one + "){0," + std::to_string(std::max(0, max_calls - 1)) +
         "}\\]";
}

std::vector<ToolCall> parse_forced_calls(const std::string& text, const std::string& named) {
  std::vector<ToolCall> calls;
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception&) {
    return calls;  // cut short (finish_reason length): no complete call
  }
  if (!named.empty()) {
    if (j.is_object()) calls.push_back(ToolCall{new_tool_call_id(), named, j.dump()});
    return calls;
  }
  if (!j.is_array()) return calls;
  for (const json& c : j) {
    if (!c.is_object() || !c.contains("name") || !c["name"].is_string()) continue;
    const json args = c.contains("parameters") ? c["parameters"] : json::object();
    calls.push_back(ToolCall{new_tool_call_id(), c["name"].get<std::string>(), args.dump()});
  }
  return calls;
}

std::string generic_tools_prompt(const std::string& tools_json) {
  std::string s =
      "You can call functions to help with the user's request. The functions are described "
      "within <tools></tools> tags:\n<tools>\n";
  try {
    for (const json& t : json::parse(tools_json)) s += t.dump() + "\n";
  } catch (const json::exception&) {
  }
  s += "</tools>\nTo call a function, reply with a JSON object with its name and arguments "
       "within <tool_call></tool_call> tags:\n<tool_call>\n{\"name\": <function-name>, "
       "\"arguments\": <args-json-object>}\n</tool_call>";
  return s;
}

std::string generic_calls_text(const json& tool_calls) {
  std::string s;
  for (const json& c : tool_calls) {
    const json& f = c.contains("function") ? c["function"] : c;
    json call = {{"name", f.value("name", "")},
                 {"arguments", f.value("arguments", json::object())}};
    if (!s.empty()) s += "\n";
    s += std::string(kHermesOpen) + "\n" + call.dump() + "\n" + kHermesClose;
  }
  return s;
}

std::string new_tool_call_id() {
  static std::atomic<uint64_t> counter{
      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count())};
  uint64_t x = counter.fetch_add(0x9e3779b97f4a7c15ull);
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 29;
  static const char* kAlnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string id;
  for (int i = 0; i < 9; ++i) {
    id += kAlnum[x % 62];
    x /= 62;
  }
  return id;
}

}  // namespace lathe
