// Structured output and tools beyond the SDK's checks, on the real engine (CPU backend, default
// model) through HTTP:
//   - min_tokens with a grammar: the grammar wins. EOS stays banned while the grammar allows more
//     text, and is allowed once the grammar allows nothing else, so a request whose grammar
//     completes before min_tokens ends with "stop" and grammar-valid output (never a hang or
//     garbage);
//   - the in-process checks Lathe Studio runs as the user types (in_process_chat.h) give the very
//     message of the server's 400 for each kind of bad input.
#include <QtTest>

#include <filesystem>

#include "engine/runtime/engine.h"
#include "engine/server/api_server.h"
#include "engine/server/in_process_chat.h"
#include "server_test_util.h"
#include "test_support.h"

using namespace lathe;
using namespace lathe::test;

class StructuredChatTest : public QObject {
  Q_OBJECT

  std::unique_ptr<Engine> engine_;
  std::unique_ptr<ApiServer> server_;
  Url url_;

  static json user(const std::string& text) {
    return json::array({{{"role", "user"}, {"content", text}}});
  }
  json chat(json body) {
    HttpClientResponse r = http_call(url_, "POST", "/v1/chat/completions", body.dump());
    if (r.status != 200) qWarning("HTTP %d: %s", r.status, r.body.c_str());
    return r.status == 200 ? parse_json(r.body) : json();
  }

 private slots:
  void initTestCase() {
    if (!std::filesystem::exists(test::default_model_path()))
      QSKIP("the default model is not in the cache; run scripts/fetch-default-model.sh");
    EngineConfig c;
    c.model_path = test::default_model_path();
    c.device.device = DeviceKind::kCpu;
    c.scheduler.max_model_len = 1024;
    Result<std::unique_ptr<Engine>> e = Engine::create(c);
    LATHE_QVERIFY_RESULT(e);
    engine_ = std::move(e).value();
    ServerConfig sc;
    sc.port = 0;
    sc.log_requests = false;
    Result<std::unique_ptr<ApiServer>> s = ApiServer::start(*engine_, sc);
    LATHE_QVERIFY_RESULT(s);
    server_ = std::move(s).value();
    url_ = local_url(server_->port());
  }

  void cleanupTestCase() {
    if (server_) server_->stop(std::chrono::milliseconds(0));
    server_.reset();
    engine_.reset();
  }

  void min_tokens_yields_to_a_complete_grammar() {
    struct Case {
      const char* name;
      json guided;
      std::function<bool(const std::string&)> valid;
    };
    const std::vector<Case> cases = {
        {"choice",
         {{"guided_choice", {"yes", "no"}}},
         [](const std::string& s) { return s == "yes" || s == "no"; }},
        {"regex",
         {{"guided_regex", "[0-9]{3}"}},
         [](const std::string& s) {
           return s.size() == 3 && std::all_of(s.begin(), s.end(), ::isdigit);
         }},
        {"schema",
         {{"response_format",
           {{"type", "json_schema"},
            {"json_schema",
             {{"name", "x"},
              {"schema",
               {{"type", "object"},
                {"properties", {{"ok", {{"type", "boolean"}}}}},
                {"required", {"ok"}}}}}}}}},
         [](const std::string& s) {
           const json j = json::parse(s, nullptr, false);
           return j.is_object() && j.size() == 1 && j.contains("ok") && j["ok"].is_boolean();
         }},
    };
    for (const Case& c : cases) {
      for (const double temperature : {0.0, 1.0}) {
        json body = {{"messages", user("Answer the question: is water wet?")},
                     {"max_tokens", 40},
                     {"min_tokens", 30},
                     {"temperature", temperature},
                     {"seed", 7},
                     {"skip_special_tokens", false}};  // any stray special token shows
        body.update(c.guided);
        const json r = chat(body);
        QVERIFY2(!r.is_null(), c.name);
        const std::string content = r["choices"][0]["message"]["content"].get<std::string>();
        QVERIFY2(c.valid(content), (std::string(c.name) + ": " + content).c_str());
        QCOMPARE(r["choices"][0]["finish_reason"].get<std::string>(), std::string("stop"));
        QVERIFY(r["usage"]["completion_tokens"].get<int>() < 30);
      }
    }
    // Where the grammar allows more text, min_tokens still holds: EOS waits.
    const json r = chat({{"messages", user("Say hi.")},
                         {"max_tokens", 40},
                         {"min_tokens", 12},
                         {"temperature", 0},
                         {"guided_regex", "[a-z ]{1,200}"}});
    QVERIFY(!r.is_null());
    QVERIFY2(r["usage"]["completion_tokens"].get<int>() >= 12, r.dump().c_str());
  }

  void studio_checks_say_what_the_server_says() {
    struct Case {
      const char* name;
      ChatOutputOptions options;
      const char* expected;  // in both messages
    };
    auto schema = [](const char* s) {
      ChatOutputOptions o;
      o.json_output = true;
      o.json_schema = s;
      return o;
    };
    auto tools = [](const char* t, const char* choice = "auto") {
      ChatOutputOptions o;
      o.tools = t;
      o.tool_choice = choice;
      return o;
    };
    ChatOutputOptions both = tools(R"([{"type": "function", "function": {"name": "f"}}])");
    both.json_output = true;
    const std::vector<Case> cases = {
        {"unsupported keyword", schema(R"({"type": "integer", "multipleOf": 5})"), "multipleOf"},
        {"not a schema", schema(R"([1, 2])"), "json_schema.schema"},
        {"pattern that cannot match", schema("{\"type\": \"string\", \"pattern\": \"^\\\"+$\"}"),
         "cannot match"},
        {"bad $ref", schema("{\"$ref\": \"#/$defs/missing\"}"), "missing"},
        {"tool without a name", tools(R"([{"type": "function", "function": {}}])"),
         "function.name is required"},
        {"tools not an array", tools(R"({"type": "function"})"), "tools must be an array"},
        {"duplicate tool", tools(R"([{"type": "function", "function": {"name": "f"}},
                                     {"type": "function", "function": {"name": "f"}}])"),
         "two functions are named f"},
        {"unsupported parameters",
         tools(R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
                   "properties": {"x": {"type": "integer", "multipleOf": 2}}}}}])",
               "required"),
         "multipleOf"},
        {"tools and JSON output", both, "not both"},
    };
    for (const Case& c : cases) {
      const std::optional<ChatOptionsProblem> p = check_chat_output_options(c.options);
      QVERIFY2(p.has_value(), c.name);
      const std::string body =
          chat_request_body(user("hi"), c.options).insert(1, "\"max_tokens\": 4, ");
      HttpClientResponse r = http_call(url_, "POST", "/v1/chat/completions", body);
      QVERIFY2(r.status == 400, (std::string(c.name) + ": " + r.body).c_str());
      const std::string server = parse_json(r.body)["error"]["message"].get<std::string>();
      QVERIFY2(
          server == p->message,
          (std::string(c.name) + ": server \"" + server + "\" vs \"" + p->message + "\"").c_str());
      QVERIFY2(server.find(c.expected) != std::string::npos, server.c_str());
    }
    // Good options pass, and an invalid JSON text is named as such.
    QVERIFY(!check_chat_output_options(schema(R"({"type": "object"})")));
    QVERIFY(!check_chat_output_options(tools(R"([{"type": "function", "function": {"name": "f",
        "parameters": {"type": "object", "properties": {"x": {"type": "string"}}}}}])")));
    const std::optional<ChatOptionsProblem> broken = check_chat_output_options(schema("{\"a\":"));
    QVERIFY(broken && broken->param == "response_format" &&
            broken->message.find("not valid JSON") != std::string::npos);
  }
};

QTEST_GUILESS_MAIN(StructuredChatTest)
#include "structured_chat_test.moc"
