// Chat templates agree with Hugging Face transformers: real models' templates (SmolLM2, Qwen2 /
// 2.5 / 3, Llama 3.1 / 3.2, Mistral Nemo, Gemma 2 / 4, Phi-3 / 3.5, Command-R, ...) render the
// same prompt, byte for byte, that apply_chat_template renders, or fail with the same message.
// Fixtures: tests/fixtures/chat/, made by scripts/fixtures/make_chat_fixtures.py.
#include <QtTest>

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <set>

#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/jinja/json.h"
#include "test_support.h"

using namespace lathe;

namespace {

// Messages and variables are read in member order (QJsonObject sorts keys, and what tojson
// prints depends on the order), with the interpreter's own JSON reader.
const jinja::Dict& ordered_fixture() {
  static const jinja::Dict root = [] {
    QFile f(QString::fromStdString(test::fixture_path("chat/chat_cases.json")));
    if (!f.open(QIODevice::ReadOnly)) qFatal("cannot open chat/chat_cases.json");
    auto v = jinja::parse_json(f.readAll().toStdString());
    if (!v.is_ok() || !v->is_dict()) qFatal("bad chat/chat_cases.json");
    return v->as_dict();
  }();
  return root;
}

const jinja::Value& member(const jinja::Value& v, const char* key) {
  const jinja::Value* m = v.as_dict().find(std::string_view(key));
  if (m == nullptr) qFatal("fixture is missing %s", key);
  return *m;
}

QByteArray read_fixture(const std::string& relative) {
  QFile f(QString::fromStdString(test::fixture_path(relative)));
  if (!f.open(QIODevice::ReadOnly)) qFatal("cannot open fixture %s", relative.c_str());
  return f.readAll();
}

const QJsonObject& fixture() {
  static const QJsonObject root =
      QJsonDocument::fromJson(read_fixture("chat/chat_cases.json")).object();
  return root;
}

// A fixture message ({"role", "content", ...}) as the ChatMessage a caller would build: other
// fields, and a null content, travel in extra_json.
ChatMessage to_message(const jinja::Value& v) {
  ChatMessage m;
  jinja::Dict extra;
  bool has_content = false;
  for (const auto& [k, val] : v.as_dict().items()) {
    const std::string& key = k.as_string();
    if (key == "role") {
      m.role = val.as_string();
    } else if (key == "content" && val.is_string()) {
      m.content = val.as_string();
      has_content = true;
    } else {
      extra.set(k, val);
    }
  }
  if (!has_content) extra.set(jinja::Value("content"), jinja::Value::none());
  if (!extra.empty()) m.extra_json = jinja::dump_json(jinja::Value::dict(extra), {});
  return m;
}

std::tm fixture_now() {
  const QDateTime now = QDateTime::fromString(fixture()["now"].toString(), Qt::ISODate);
  std::tm tm{};
  tm.tm_year = now.date().year() - 1900;
  tm.tm_mon = now.date().month() - 1;
  tm.tm_mday = now.date().day();
  tm.tm_hour = now.time().hour();
  tm.tm_min = now.time().minute();
  tm.tm_sec = now.time().second();
  return tm;
}

}  // namespace

class ChatTemplateTest : public QObject {
  Q_OBJECT
 private slots:
  void fixtures_cover_the_families() {
    // SmolLM2 and at least three other families render the three-turn conversation with a
    // system prompt, with and without the generation prompt; a template raises on bad input.
    std::set<QString> three_turn, without_system, raising;
    std::set<std::pair<QString, bool>> generation_prompt;
    for (const auto& c : fixture()["cases"].toArray()) {
      const QJsonObject o = c.toObject();
      const QString conv = o["conversation"].toString();
      if (o.contains("expected") && conv == "system_3turn") {
        three_turn.insert(o["template"].toString());
        generation_prompt.insert({o["template"].toString(), o["add_generation_prompt"].toBool()});
      }
      if (o.contains("expected") && conv == "no_system")
        without_system.insert(o["template"].toString());
      if (o["error_kind"].toString() == "raised") raising.insert(o["template"].toString());
    }
    QVERIFY(three_turn.count("smollm2") == 1);
    QVERIFY2(three_turn.size() >= 4, "need SmolLM2 and three other families");
    for (const char* name : {"smollm2", "qwen2", "llama3_1", "command_r"}) {
      QVERIFY2(generation_prompt.count({name, true}) && generation_prompt.count({name, false}),
               name);
      QVERIFY2(without_system.count(name), name);
    }
    QVERIFY(raising.count("command_r") && raising.count("mistral_nemo"));
  }

  void renders_like_transformers_data() {
    QTest::addColumn<int>("index");
    const QJsonArray cases = fixture()["cases"].toArray();
    for (int i = 0; i < cases.size(); ++i) {
      const QJsonObject o = cases[i].toObject();
      const QString name = QString("%1/%2/%3%4")
                               .arg(o["template"].toString(), o["conversation"].toString(),
                                    o["add_generation_prompt"].toBool() ? "gen" : "nogen",
                                    o["variables"].toObject().isEmpty() ? "" : "/vars");
      QTest::newRow(name.toUtf8().constData()) << i;
    }
  }

  void renders_like_transformers() {
    QFETCH(int, index);
    const QJsonObject c = fixture()["cases"].toArray()[index].toObject();
    const QJsonObject t = fixture()["templates"].toObject()[c["template"].toString()].toObject();
    const QByteArray source = read_fixture("chat/" + t["file"].toString().toStdString());
    auto tmpl = ChatTemplate::compile(source.toStdString());
    LATHE_QVERIFY_RESULT(tmpl);

    const jinja::Value& cases = *ordered_fixture().find(std::string_view("cases"));
    const jinja::Value& variables =
        member(cases.as_list().items[static_cast<size_t>(index)], "variables");
    const jinja::Value& conversation =
        member(*ordered_fixture().find(std::string_view("conversations")),
               c["conversation"].toString().toUtf8().constData());
    std::vector<ChatMessage> messages;
    for (const auto& m : conversation.as_list().items) messages.push_back(to_message(m));
    ChatRenderOptions options;
    options.add_generation_prompt = c["add_generation_prompt"].toBool();
    options.bos_token = t["bos_token"].toString().toStdString();  // null -> "" (undefined)
    options.eos_token = t["eos_token"].toString().toStdString();
    if (!variables.as_dict().empty()) options.variables_json = jinja::dump_json(variables, {});
    options.now = fixture_now();

    auto out = tmpl->render(messages, options);
    if (c.contains("expected")) {
      LATHE_QVERIFY_RESULT(out);
      QCOMPARE(QString::fromStdString(*out), c["expected"].toString());
      return;
    }
    QVERIFY2(!out.is_ok(), "transformers raised but Lathe rendered");
    if (c["error_kind"].toString() == "raised") {
      QCOMPARE(out.status().code(), ErrorCode::kInvalidArgument);
      QCOMPARE(QString::fromStdString(out.status().message()), c["error"].toString());
    } else {
      QVERIFY2(
          out.status().message().find(c["error"].toString().toStdString()) != std::string::npos,
          out.status().message().c_str());
    }
  }

  void compile_errors_name_line_and_column() {
    auto t = ChatTemplate::compile(
        "{% for message in messages %}\n{{ message['content'] }\n{% endfor %}");
    QVERIFY(!t.is_ok());
    QCOMPARE(t.status().code(), ErrorCode::kInvalidArgument);
    QVERIFY2(t.status().message().rfind("chat template: line 2, column ", 0) == 0,
             t.status().message().c_str());
  }

  void render_errors_name_the_template_location() {
    auto t =
        ChatTemplate::compile("{{ messages[0].content.upper() }}\n{{ messages[0].nope.deeper }}");
    LATHE_QVERIFY_RESULT(t);
    auto out = t->render({{"user", "hi"}}, {});
    QVERIFY(!out.is_ok());
    QVERIFY2(out.status().message() ==
                 "chat template: line 2, column 20: 'dict object' has no attribute 'nope'",
             out.status().message().c_str());
  }

  void message_extra_fields_reach_the_template() {
    auto t = ChatTemplate::compile(
        "{% for m in messages %}{{ m.role }}:{{ m.content is defined }}:{{ m.tool_calls | "
        "default([]) | length }}"
        ":{{ m.thinking | default('-') }}:{{ m.reasoning_content | default('-') }};{% endfor %}"
        "{{ tools | length if tools else 'no tools' }}|{{ documents }}|{{ bos_token is defined "
        "}}|{{ flag }}");
    LATHE_QVERIFY_RESULT(t);
    std::vector<ChatMessage> messages = {
        {"user", "hi", ""},
        {"assistant", "", R"({"content": null, "tool_calls": [{"type": "function"}]})"},
        {"assistant", "ok", R"({"reasoning": "because"})"},
    };
    ChatRenderOptions options;
    options.variables_json = R"({"flag": "on"})";
    auto out = t->render(messages, options);
    LATHE_QVERIFY_RESULT(out);
    QCOMPARE(*out,
             std::string("user:True:0:-:-;assistant:False:1:-:-;assistant:True:0:because:because;"
                         "no tools|None|False|on"));
  }

  void bad_extra_json_is_a_clear_error() {
    auto t = ChatTemplate::compile("{{ messages | length }}");
    LATHE_QVERIFY_RESULT(t);
    auto out = t->render({{"user", "a", ""}, {"user", "b", "[1, 2]"}}, {});
    QVERIFY(!out.is_ok());
    QVERIFY2(out.status().message().find("messages[1].extra_json must be a JSON object") !=
                 std::string::npos,
             out.status().message().c_str());
    ChatRenderOptions options;
    options.variables_json = "{not json";
    out = t->render({{"user", "a"}}, options);
    QVERIFY(!out.is_ok());
    QVERIFY2(out.status().message().find("invalid JSON") != std::string::npos,
             out.status().message().c_str());
  }

  void runaway_template_stops() {
    auto t = ChatTemplate::compile(
        "{% for m in messages %}{% for i in range(1000000) %}{{ m.content }}{% endfor %}{% endfor "
        "%}");
    LATHE_QVERIFY_RESULT(t);
    auto out = t->render({{"user", std::string(1000, 'x')}}, {});
    QVERIFY(!out.is_ok());
    QCOMPARE(out.status().code(), ErrorCode::kResourceExhausted);
  }
};

QTEST_GUILESS_MAIN(ChatTemplateTest)
#include "chat_template_test.moc"
