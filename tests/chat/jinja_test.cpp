// The Jinja interpreter behind chat templates: snippets rendered exactly as Jinja2 renders them in
// Hugging Face's environment (fixtures made by scripts/fixtures/make_chat_fixtures.py), errors that
// name the line and column, and limits that stop hostile templates instead of hanging or crashing.
#include <QtTest>

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <chrono>
#include <thread>

#include "engine/tokenizer/jinja/json.h"
#include "engine/tokenizer/jinja/template.h"
#include "test_support.h"

using namespace lathe;
using namespace lathe::jinja;

namespace {

QJsonObject load_json(const std::string& relative) {
  QFile f(QString::fromStdString(test::fixture_path(relative)));
  if (!f.open(QIODevice::ReadOnly)) qFatal("cannot open fixture %s", relative.c_str());
  return QJsonDocument::fromJson(f.readAll()).object();
}

// 2025-03-07 14:05:09, the "now" the fixtures were rendered with.
std::tm fixture_now() {
  std::tm tm{};
  tm.tm_year = 2025 - 1900;
  tm.tm_mon = 2;
  tm.tm_mday = 7;
  tm.tm_hour = 14;
  tm.tm_min = 5;
  tm.tm_sec = 9;
  return tm;
}

// The "context" object of jinja_cases.json, parsed in member order (QJsonObject sorts keys, and
// tojson output depends on the order).
Dict fixture_context() {
  QFile f(QString::fromStdString(test::fixture_path("chat/jinja_cases.json")));
  if (!f.open(QIODevice::ReadOnly)) qFatal("cannot open chat/jinja_cases.json");
  auto v = parse_json(f.readAll().toStdString());
  if (!v.is_ok() || !v->is_dict()) qFatal("bad chat/jinja_cases.json");
  const Value* context = v->as_dict().find(std::string_view("context"));
  if (context == nullptr || !context->is_dict()) qFatal("chat/jinja_cases.json has no context");
  return context->as_dict();
}

struct Rendered {
  Status status;
  std::string text;
  bool raised = false;
};

Rendered render(const std::string& source, const Dict& vars = {}, RenderLimits limits = {}) {
  Rendered r;
  auto t = Template::parse(source);
  if (!t.is_ok()) {
    r.status = t.status();
    return r;
  }
  RenderSettings settings;
  settings.limits = limits;
  settings.now = fixture_now();
  auto out = (*t)->render(vars, settings, &r.raised);
  if (out.is_ok())
    r.text = *out;
  else
    r.status = out.status();
  return r;
}

#define QVERIFY_FAILS_WITH(rendered, expected_code, substring)                    \
  do {                                                                            \
    const Rendered& r_ = (rendered);                                              \
    QVERIFY2(!r_.status.is_ok(),                                                  \
             ("rendered instead of failing: " + r_.text.substr(0, 200)).c_str()); \
    QVERIFY2(r_.status.code() == (expected_code), r_.status.message().c_str());   \
    QVERIFY2(r_.status.message().find(substring) != std::string::npos,            \
             r_.status.message().c_str());                                        \
  } while (0)

}  // namespace

class JinjaTest : public QObject {
  Q_OBJECT
 private slots:
  // ---- agreement with Jinja2 ----

  void renders_like_jinja2_data() {
    QTest::addColumn<QString>("source");
    QTest::addColumn<QString>("expected");
    QTest::addColumn<QString>("error");
    QTest::addColumn<QString>("error_kind");
    const QJsonObject root = load_json("chat/jinja_cases.json");
    const QJsonArray cases = root["cases"].toArray();
    QVERIFY(cases.size() >= 60);
    for (const auto& c : cases) {
      const QJsonObject o = c.toObject();
      QTest::newRow(o["name"].toString().toUtf8().constData())
          << o["template"].toString() << o["expected"].toString() << o["error"].toString()
          << o["error_kind"].toString();
    }
  }

  void renders_like_jinja2() {
    QFETCH(QString, source);
    QFETCH(QString, expected);
    QFETCH(QString, error);
    QFETCH(QString, error_kind);
    static const Dict context = fixture_context();
    const Rendered r = render(source.toStdString(), context);
    if (error.isEmpty()) {
      LATHE_QVERIFY_OK(r.status);
      QCOMPARE(QString::fromStdString(r.text), expected);
      return;
    }
    QVERIFY2(
        !r.status.is_ok(),
        ("expected an error like \"" + error.toStdString() + "\", got output: " + r.text).c_str());
    if (error_kind == "raised") {
      // raise_exception(): the template's own words, nothing added.
      QVERIFY(r.raised);
      QCOMPARE(r.status.code(), ErrorCode::kInvalidArgument);
      QCOMPARE(QString::fromStdString(r.status.message()), error);
    } else {
      QVERIFY(!r.raised);
      QVERIFY2(r.status.message().rfind("line 1, column ", 0) == 0, r.status.message().c_str());
    }
  }

  // ---- errors a template author can act on ----

  void syntax_errors_name_line_and_column_data() {
    QTest::addColumn<QString>("source");
    QTest::addColumn<QString>("location");
    QTest::addColumn<QString>("what");
    QTest::newRow("missing operand") << "Hello\n{{ x + }}"
                                     << "line 2, column 8"
                                     << "unexpected '}}'";
    QTest::newRow("unclosed variable") << "a\n  {{ x "
                                       << "line 2, column 3"
                                       << "never closed with '}}'";
    QTest::newRow("unclosed block tag") << "{% if x\nabc"
                                        << "line 1, column 1"
                                        << "never closed with '%}'";
    QTest::newRow("unclosed if") << "x\n{% if x %}\nabc"
                                 << "line 2, column 1"
                                 << "'if' block opened here is never closed";
    QTest::newRow("unclosed for") << "{% for m in messages %}{{ m }}"
                                  << "line 1, column 1"
                                  << "{% endfor %}";
    QTest::newRow("unclosed comment") << "ok\n\n{# note"
                                      << "line 3, column 1"
                                      << "comment";
    QTest::newRow("unclosed string") << "{{ 'abc }}"
                                     << "line 1, column 4"
                                     << "string literal is never closed";
    QTest::newRow("stray end tag") << "{% for x in y %}{% endif %}"
                                   << "line 1, column 17"
                                   << "unexpected 'endif' inside a 'for' block";
    QTest::newRow("unknown tag") << "\n\n   {% frobnicate %}"
                                 << "line 3, column 4"
                                 << "unknown tag 'frobnicate'";
    QTest::newRow("unknown filter") << "{{ x }}\n{{ x | no_such_filter }}"
                                    << "line 2, column 8"
                                    << "no filter named 'no_such_filter'";
    QTest::newRow("unknown test") << "{% for m in x if m is wobbly %}{% endfor %}"
                                  << "line 1, column 23"
                                  << "no test named 'wobbly'";
    QTest::newRow("unbalanced bracket") << "{{ (1, 2 ] }}"
                                        << "line 1, column 10"
                                        << "unexpected ']', expected ')'";
    QTest::newRow("bad character") << "{{ a ? b }}"
                                   << "line 1, column 6"
                                   << "unexpected character '?'";
    QTest::newRow("break outside loop") << "{% if x %}{% break %}{% endif %}"
                                        << "line 1, column 11"
                                        << "'break' outside of a for loop";
    QTest::newRow("column counts characters") << "été {{ ) }}"
                                              << "line 1, column 8"
                                              << "unexpected ')'";
  }

  void syntax_errors_name_line_and_column() {
    QFETCH(QString, source);
    QFETCH(QString, location);
    QFETCH(QString, what);
    auto t = Template::parse(source.toStdString());
    QVERIFY(!t.is_ok());
    const std::string msg = t.status().message();
    QCOMPARE(t.status().code(), ErrorCode::kInvalidArgument);
    QVERIFY2(msg.rfind(location.toStdString() + ": ", 0) == 0, msg.c_str());
    QVERIFY2(msg.find(what.toStdString()) != std::string::npos, msg.c_str());
  }

  void unsupported_tags_are_named() {
    auto t = Template::parse("{% include 'other.jinja' %}");
    QVERIFY(!t.is_ok());
    QCOMPARE(t.status().code(), ErrorCode::kUnsupported);
    QVERIFY2(t.status().message().find("'include' tag is not supported") != std::string::npos,
             t.status().message().c_str());
  }

  void runtime_errors_name_line_and_column() {
    Dict vars;
    Dict d;
    d.set(Value("a"), Value(1));
    vars.set(Value("d"), Value::dict(d));
    Rendered r = render("line one\n  {{ d.missing.deeper }}", vars);
    QVERIFY_FAILS_WITH(r, ErrorCode::kInvalidArgument, "'dict object' has no attribute 'missing'");
    QVERIFY2(r.status.message().rfind("line 2, column ", 0) == 0, r.status.message().c_str());

    r = render("{% for i in range(3) %}\n{{ i ~ undefined_function() }}{% endfor %}");
    QVERIFY_FAILS_WITH(r, ErrorCode::kInvalidArgument, "'undefined_function' is undefined");
    QVERIFY2(r.status.message().rfind("line 2, column ", 0) == 0, r.status.message().c_str());

    r = render("{{ 'text' | int(base=99) }}");  // Jinja: int() fails, so the default
    LATHE_QVERIFY_OK(r.status);
    QCOMPARE(r.text, std::string("0"));
    r = render("{{ 'a'.no_such_method() }}");
    QVERIFY_FAILS_WITH(r, ErrorCode::kInvalidArgument,
                       "'str object' has no attribute 'no_such_method'");
    r = render("{{ (5)() }}");
    QVERIFY_FAILS_WITH(r, ErrorCode::kInvalidArgument, "'int' object is not callable");
    r = render("{{ x | groupby('a') }}");
    QVERIFY_FAILS_WITH(r, ErrorCode::kUnsupported, "'groupby' filter is not supported");
  }

  void raise_exception_carries_the_templates_message() {
    const Rendered r = render(
        "{% if true %}{{ raise_exception('Only user and assistant roles are supported!') }}{% "
        "endif %}");
    QVERIFY(r.raised);
    QCOMPARE(r.status.code(), ErrorCode::kInvalidArgument);
    QCOMPARE(r.status.message(), std::string("Only user and assistant roles are supported!"));
  }

  // ---- limits: hostile templates stop with an error, quickly ----

  void output_size_is_capped() {
    RenderLimits limits;
    limits.max_output_bytes = 1 << 20;
    Rendered r = render("{% for i in range(100000) %}{{ 'x' * 100 }}{% endfor %}", {}, limits);
    QVERIFY_FAILS_WITH(r, ErrorCode::kResourceExhausted, "output exceeds");
    // Default limit (10 MiB), string built in one expression.
    r = render("{{ 'x' * 100000000 }}");
    QVERIFY_FAILS_WITH(r, ErrorCode::kResourceExhausted, "byte limit");
  }

  void runaway_loops_stop() {
    RenderLimits limits;
    limits.max_iterations = 100000;
    Rendered r = render(
        "{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}", {}, limits);
    QVERIFY_FAILS_WITH(r, ErrorCode::kResourceExhausted, "loop iterations");
    r = render("{% for i in range(10 ** 15) %}x{% endfor %}");
    QVERIFY_FAILS_WITH(r, ErrorCode::kResourceExhausted, "range() of 1000000000000000 items");
    // Doubling a string: every step stays under the output cap until the total work runs out.
    r = render(
        "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% "
        "endfor %}");
    QVERIFY_FAILS_WITH(r, ErrorCode::kResourceExhausted, "byte");
  }

  void default_limits_stop_a_runaway_loop_quickly() {
    const auto start = std::chrono::steady_clock::now();
    const Rendered r = render(
        "{% for i in range(1000000) %}{% for j in range(1000000) %}{% endfor %}{% endfor %}");
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    QVERIFY_FAILS_WITH(r, ErrorCode::kResourceExhausted, "loop iterations");
    QVERIFY2(seconds < 20.0, std::to_string(seconds).c_str());
  }

  void runaway_recursion_stops() {
    Rendered r = render("{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}{{ m(0) }}");
    QVERIFY_FAILS_WITH(r, ErrorCode::kResourceExhausted, "macro calls nested more than");
    // Exponential fan-out under the depth limit: the call budget stops it.
    r = render(
        "{% macro m(n) %}{% if n < 40 %}{{ m(n + 1) }}{{ m(n + 1) }}{% endif %}{% endmacro %}{{ "
        "m(0) }}");
    QVERIFY_FAILS_WITH(r, ErrorCode::kResourceExhausted, "macro calls");
    // A recursive for loop over a self-referencing structure cannot recurse forever either.
    r = render(
        "{% set ns = namespace() %}{% set ns.me = [ns] %}{% for n in [ns] recursive %}{{ "
        "loop(n.me) }}{% endfor %}");
    QVERIFY_FAILS_WITH(r, ErrorCode::kResourceExhausted, "nested too deeply");
  }

  void deep_nesting_is_an_error_not_a_crash() {
    const std::string parens = std::string(5000, '(') + "1" + std::string(5000, ')');
    Rendered r = render("{{ " + parens + " }}");
    QVERIFY_FAILS_WITH(r, ErrorCode::kInvalidArgument, "nested more than");
    std::string ifs;
    for (int i = 0; i < 2000; ++i) ifs += "{% if true %}";
    r = render(ifs);
    QVERIFY_FAILS_WITH(r, ErrorCode::kInvalidArgument, "nested more than");
    // A list nested 100000 levels deep, built at run time: printing it is refused, and freeing it
    // (when the render ends) does not overflow the stack.
    r = render(
        "{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = [ns.l] %}{% "
        "endfor %}"
        "{{ ns.l | length }}");
    LATHE_QVERIFY_OK(r.status);
    QCOMPARE(r.text, std::string("1"));
    r = render(
        "{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = [ns.l] %}{% "
        "endfor %}"
        "{{ ns.l }}");
    QVERIFY_FAILS_WITH(r, ErrorCode::kInvalidArgument, "nested more than 256 levels");
    r = render(
        "{% set ns = namespace(l=[]) %}{% for i in range(1000) %}{% set ns.l = [ns.l] %}{% endfor "
        "%}"
        "{{ ns.l | tojson }}");
    QVERIFY_FAILS_WITH(r, ErrorCode::kInvalidArgument, "256 levels");
  }

  void self_referencing_namespace_renders() {
    const Rendered r = render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}");
    LATHE_QVERIFY_OK(r.status);
    QCOMPARE(r.text, std::string("<Namespace {'me': <Namespace ...>}>"));
  }

  // ---- API contracts ----

  void strftime_now_uses_the_clock_when_now_is_unset() {
    auto t = Template::parse("{{ strftime_now('%Y-%m-%d') }}");
    LATHE_QVERIFY_RESULT(t);
    auto out = (*t)->render({});
    LATHE_QVERIFY_RESULT(out);
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    char expected[32];
    std::strftime(expected, sizeof(expected), "%Y-%m-%d", &local);
    QCOMPARE(*out, std::string(expected));
  }

  void variables_shadow_globals() {
    Dict vars;
    vars.set(Value("range"), Value("not a function"));
    const Rendered r = render("{{ range }}", vars);
    LATHE_QVERIFY_OK(r.status);
    QCOMPARE(r.text, std::string("not a function"));
  }

  void one_template_renders_on_many_threads() {
    auto t = Template::parse(
        "{% set ns = namespace(n=0) %}{% for i in range(200) %}{% set ns.n = ns.n + i %}{% endfor "
        "%}"
        "{{ ns.n }}-{{ who }}");
    LATHE_QVERIFY_RESULT(t);
    std::shared_ptr<const Template> tmpl = *t;
    std::vector<std::string> outputs(8);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < outputs.size(); ++i) {
      threads.emplace_back([&, i] {
        Dict vars;
        vars.set(Value("who"), Value(static_cast<int64_t>(i)));
        for (int k = 0; k < 50; ++k) {
          auto out = tmpl->render(vars);
          outputs[i] = out.is_ok() ? *out : out.status().message();
        }
      });
    }
    for (auto& th : threads) th.join();
    for (size_t i = 0; i < outputs.size(); ++i) QCOMPARE(outputs[i], "19900-" + std::to_string(i));
  }

  void json_round_trip_keeps_member_order() {
    auto v = parse_json(R"({"z": 1, "a": [true, null, 2.5, "é\n"], "m": {}})");
    LATHE_QVERIFY_RESULT(v);
    QCOMPARE(dump_json(*v, {}), std::string(R"({"z": 1, "a": [true, null, 2.5, "é\n"], "m": {}})"));
    QVERIFY(!parse_json("{\"unterminated\": ").is_ok());
    QVERIFY(!parse_json(std::string(100000, '[')).is_ok());
  }
};

QTEST_GUILESS_MAIN(JinjaTest)
#include "jinja_test.moc"
