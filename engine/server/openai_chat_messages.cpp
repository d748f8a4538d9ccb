#include "engine/server/openai_chat_messages.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>

#include "engine/core/strings.h"

namespace lathe {
namespace {

using json = nlohmann::json;

MaybeApiError parse_content(const json& content, const std::string& field, std::string* out) {
  if (content.is_string()) {
    *out = content.get<std::string>();
    return {};
  }
  if (!content.is_array())
    return wrong_type(field, "a string or an array of text parts", content, "messages");
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    const std::string pf = strformat("%s[%zu]", field.c_str(), i);
    if (!part.is_object())
      return wrong_type(pf, "an object like {\"type\": \"text\", \"text\": \"...\"}", part,
                        "messages");
    auto type = part.find("type");
    if (type == part.end() || !type->is_string())
      return bad_request(pf + ".type must be a string such as \"text\"", "messages");
    if (*type != "text")
      return bad_request(strformat("%s: only text parts are supported, not \"%s\"", pf.c_str(),
                                   type->get<std::string>().c_str()),
                         "messages");
    auto t = part.find("text");
    if (t == part.end() || !t->is_string())
      return bad_request(pf + ".text must be a string", "messages");
    if (i > 0) text += "\n";
    text += t->get<std::string>();
  }
  *out = std::move(text);
  return {};
}

// An assistant message's tool_calls (OpenAI: [{"id", "type": "function", "function": {"name",
// "arguments": JSON text}}]) into the message dict templates read, arguments as objects (as
// transformers' templates and vLLM expect).
MaybeApiError parse_message_tool_calls(const json& v, const std::string& field, json* extra) {
  if (!v.is_array()) return wrong_type(field, "an array", v, "messages");
  json calls = json::array();
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string cf = strformat("%s[%zu]", field.c_str(), i);
    const json& c = v[i];
    if (!c.is_object() || !c.contains("function") || !c["function"].is_object())
      return bad_request(cf + " must be {\"id\", \"type\": \"function\", \"function\": "
                              "{\"name\", \"arguments\"}}",
                         "messages");
    const json& fn = c["function"];
    if (!fn.contains("name") || !fn["name"].is_string())
      return bad_request(cf + ".function.name must be a string", "messages");
    json args = json::object();
    if (fn.contains("arguments") && !fn["arguments"].is_null()) {
      if (fn["arguments"].is_string()) {
        try {
          args = json::parse(fn["arguments"].get<std::string>());
        } catch (const json::exception&) {
          return bad_request(cf + ".function.arguments is not valid JSON", "messages");
        }
      } else {
        args = fn["arguments"];
      }
    }
    json call = {{"type", "function"},
                 {"function", {{"name", fn["name"]}, {"arguments", std::move(args)}}}};
    if (c.contains("id") && c["id"].is_string()) call["id"] = c["id"];
    calls.push_back(std::move(call));
  }
  (*extra)["tool_calls"] = std::move(calls);
  return {};
}

}  // namespace

// tools: [{"type": "function", "function": {"name", "description"?, "parameters"?, "strict"?}}]
// and tool_choice: "none" | "auto" | "required" | {"type": "function", "function": {"name"}}.
MaybeApiError parse_chat_tools(const JsonFields& f, OpenAiRequest* out) {
  for (const char* legacy : {"functions", "function_call"})
    if (f.has(legacy))
      return bad_request(std::string(legacy) +
                             " is deprecated and not supported; use tools and "
                             "tool_choice",
                         legacy);
  if (const json* v = f.get("tools")) {
    if (!v->is_array()) return wrong_type("tools", "an array", *v);
    if (v->size() > 128) return bad_request("tools takes at most 128 functions", "tools");
    for (size_t i = 0; i < v->size(); ++i) {
      const json& t = (*v)[i];
      const std::string tf = strformat("tools[%zu]", i);
      if (!t.is_object() || t.value("type", json()) != "function" || !t.contains("function") ||
          !t["function"].is_object())
        return bad_request(tf + " must be {\"type\": \"function\", \"function\": {\"name\": "
                                "..., \"parameters\": {...}}}",
                           "tools");
      const json& fn = t["function"];
      if (!fn.contains("name") || !fn["name"].is_string())
        return bad_request(tf + ".function.name is required (a string)", "tools");
      const std::string name = fn["name"].get<std::string>();
      const bool name_ok =
          !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
          });
      if (!name_ok)
        return bad_request(
            tf + ".function.name must be 1 to 64 letters, digits, '_' or '-', got \"" + name + "\"",
            "tools");
      if (std::find(out->tool_names.begin(), out->tool_names.end(), name) != out->tool_names.end())
        return bad_request("tools: two functions are named " + name, "tools");
      if (fn.contains("description") && !fn["description"].is_string())
        return bad_request(tf + ".function.description must be a string", "tools");
      if (fn.contains("parameters") && !fn["parameters"].is_object())
        return bad_request(tf + ".function.parameters must be a JSON schema object", "tools");
      out->tool_names.push_back(name);
    }
    if (!v->empty()) out->tools_json = v->dump();
  }
  const json* c = f.get("tool_choice");
  if (c == nullptr) return {};
  if (c->is_string()) {
    const std::string s = c->get<std::string>();
    if (s == "none") {
      out->tool_choice = ToolChoice::kNone;
    } else if (s == "auto") {
      out->tool_choice = ToolChoice::kAuto;
    } else if (s == "required") {
      out->tool_choice = ToolChoice::kRequired;
    } else {
      return bad_request(
          "tool_choice must be none, auto, required or {\"type\": \"function\", "
          "\"function\": {\"name\": ...}}, got \"" +
              s + "\"",
          "tool_choice");
    }
  } else if (c->is_object() && c->contains("function") && (*c)["function"].is_object() &&
             (*c)["function"].contains("name") && (*c)["function"]["name"].is_string()) {
    out->tool_choice = ToolChoice::kNamed;
    out->tool_choice_name = (*c)["function"]["name"].get<std::string>();
    if (std::find(out->tool_names.begin(), out->tool_names.end(), out->tool_choice_name) ==
        out->tool_names.end())
      return bad_request("tool_choice names the function " + out->tool_choice_name +
                             ", which is not among the tools",
                         "tool_choice");
  } else {
    return bad_request(
        "tool_choice must be none, auto, required or {\"type\": \"function\", "
        "\"function\": {\"name\": ...}}",
        "tool_choice");
  }
  if ((out->tool_choice == ToolChoice::kRequired) && out->tools_json.empty())
    return bad_request("tool_choice required needs tools", "tool_choice");
  return {};
}

MaybeApiError parse_chat_messages(const JsonFields& f, OpenAiRequest* out) {
  const json* v = f.get("messages");
  if (v == nullptr)
    return bad_request("messages is required: a list of {\"role\", \"content\"} objects",
                       "messages");
  if (!v->is_array()) return wrong_type("messages", "an array", *v);
  if (v->empty()) return bad_request("messages must not be empty", "messages");
  if (v->size() > 100000) return bad_request("messages has more than 100000 entries", "messages");
  for (size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    const std::string mf = strformat("messages[%zu]", i);
    if (!m.is_object()) return wrong_type(mf, "an object", m, "messages");
    ChatMessage msg;
    json extra = json::object();
    for (auto it = m.begin(); it != m.end(); ++it) {
      const std::string& k = it.key();
      if (k == "role") {
        if (!it->is_string()) return wrong_type(mf + ".role", "a string", *it, "messages");
        msg.role = it->get<std::string>();
      } else if (k == "content") {
        if (!it->is_null())
          if (auto e = parse_content(*it, mf + ".content", &msg.content)) return e;
      } else if (k == "name" || k == "refusal" || k == "tool_call_id") {
        if (!it->is_null() && !it->is_string())
          return wrong_type(mf + "." + k, "a string", *it, "messages");
        if (it->is_string() && k != "refusal") extra[k] = *it;
      } else if (k == "tool_calls") {
        if (it->is_null() || (it->is_array() && it->empty())) continue;
        if (auto e = parse_message_tool_calls(*it, mf + ".tool_calls", &extra)) return e;
      } else {
        return bad_request(strformat("%s: unrecognized field \"%s\"", mf.c_str(), k.c_str()),
                           "messages");
      }
    }
    if (msg.role.empty())
      return bad_request(mf + ".role is required (system, user or assistant)", "messages");
    if (msg.role == "developer") msg.role = "system";
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" && msg.role != "tool")
      return bad_request(strformat("%s.role must be system, user, assistant or tool, got \"%s\"",
                                   mf.c_str(), msg.role.c_str()),
                         "messages");
    if (extra.contains("tool_calls") && msg.role != "assistant")
      return bad_request(mf + ".tool_calls belongs to assistant messages", "messages");
    if (msg.role == "tool" && !extra.contains("tool_call_id"))
      return bad_request(mf + ".tool_call_id is required for a tool message (the id of the call "
                              "it answers)",
                         "messages");
    const bool calls_only = extra.contains("tool_calls");
    if ((!m.contains("content") && !calls_only) ||
        (m.contains("content") && m["content"].is_null() && msg.role != "assistant"))
      return bad_request(mf + ".content is required", "messages");
    // An assistant turn that only calls tools keeps content "" (templates such as Qwen3's read it).
    if (!extra.empty()) msg.extra_json = extra.dump();
    out->spec.messages.push_back(std::move(msg));
  }
  return {};
}

}  // namespace lathe
