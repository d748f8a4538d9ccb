// Constrained decoding (engine/grammar): the regex dialect, integer and number ranges, JSON schemas
// as regexes (valid instances match, invalid ones do not), unsupported and invalid input refused by
// name, and token masks over a small byte-level vocabulary: a masked token is exactly a token whose
// bytes lead to a dead state, end ids only where the output is complete, and random constrained
// walks always end in text that matches and parses.
#include <QtTest>

#include <nlohmann/json.hpp>

#include <random>

#include "engine/grammar/byte_regex.h"
#include "engine/grammar/grammar_constraint.h"
#include "engine/grammar/json_schema_regex.h"
#include "fake_byte_tokenizer.h"

using namespace lathe;
using ojson = nlohmann::ordered_json;

namespace {

// Every single byte, plus common multi-byte pieces of JSON text.
const test::FakeByteTokenizer& tokenizer() {
  static const test::FakeByteTokenizer t({"{\"",   "\":",  "\": ", "\",", ", \"", "\"}", "true",
                                          "false", "null", "name", "age", "12",   "345", "\"\n",
                                          " {",    "},",   "[\"",  "\"]", "\\u",  "\\n", "é",
                                          "ab",    "abc",  "-1",   "0.5", "e+",   "\"a"});
  return t;
}
std::shared_ptr<const TokenVocabulary> vocab() {
  static const auto v = std::make_shared<const TokenVocabulary>(tokenizer());
  return v;
}

std::shared_ptr<GrammarConstraint> constraint(const std::string& regex) {
  Result<std::shared_ptr<GrammarConstraint>> c = GrammarConstraint::create(regex, vocab());
  if (!c.is_ok()) qFatal("%s: %s", regex.c_str(), c.status().message().c_str());
  return c.value();
}

std::string schema_regex(const std::string& schema) {
  Result<std::string> r = json_schema_to_regex(ojson::parse(schema));
  if (!r.is_ok()) qFatal("%s: %s", schema.c_str(), r.status().message().c_str());
  return r.value();
}

bool allowed(const TokenMask& m, TokenId t) {
  return (m[static_cast<size_t>(t) >> 5] >> (t & 31)) & 1u;
}

// A random walk under the mask: tokens drawn uniformly among the allowed ones, ending when the
// end token is drawn (or after max_steps). Returns the text and whether it ended.
std::pair<std::string, bool> walk(GrammarConstraint& c, std::mt19937& rng, int max_steps) {
  const std::vector<TokenId> end = {0};
  int32_t s = c.start();
  std::string text;
  for (int step = 0; step < max_steps; ++step) {
    const std::shared_ptr<const TokenMask> m = c.allowed(s, end);
    std::vector<TokenId> ok;
    for (TokenId t = 0; t < tokenizer().vocab_size(); ++t)
      if (allowed(*m, t)) ok.push_back(t);
    if (ok.empty()) return {text, false};
    // Prefer ending once possible half of the time, so walks finish.
    if (allowed(*m, 0) && rng() % 2 == 0) return {text, true};
    const TokenId t = ok[rng() % ok.size()];
    if (t == 0) return {text, true};
    text += tokenizer().token_bytes(t);
    s = c.advance(s, t);
    if (s < 0) return {text + "<dead>", false};
  }
  return {text, false};
}

}  // namespace

class GrammarTest : public QObject {
  Q_OBJECT
 private slots:
  void regex_dialect();
  void bad_regexes_are_refused_by_name();
  void integer_ranges_are_exact();
  void number_bounds_hold_for_fractions();
  // 20 schemas of varying shape: instances that validate match, ones that do not are refused, and
  // random constrained walks end in JSON that parses.
  void schemas_data();
  void schemas();
  void json_object_and_choices();
  void unsupported_schemas_are_refused_by_name();
  // The mask is exact: a token is allowed iff its bytes keep the output completable; the end id
  // iff the output so far is complete; a complete output with no continuation allows only it.
  void masks_match_brute_force();
};

void GrammarTest::regex_dialect() {
  struct Case {
    const char* regex;
    std::vector<std::string> yes, no;
  };
  const std::vector<Case> cases = {
      {"abc", {"abc"}, {"ab", "abcd", ""}},
      {"^a(b|cd)*e$", {"ae", "abe", "acdbe"}, {"ace", "a"}},
      {"[a-c]{2,3}", {"ab", "cca"}, {"a", "abcd", "ad"}},
      {"\\d+(\\.\\d{1,2})?", {"3", "12.5", "0.25"}, {"1.", "1.234", "a"}},
      {"[^\"\\\\]*", {"", "é ok", "x"}, {"\"", "\\"}},
      {".", {"a", "é", "\xe2\x82\xac"}, {"\n", "ab", "\xff"}},
      {"\\u00e9|\\x41", {"é", "A"}, {"e"}},
      {"(?:ab)?c+?", {"c", "abcc"}, {"ab"}},
      {"a{3}", {"aaa"}, {"aa", "aaaa"}},
      {"\\{x\\}", {"{x}"}, {"x"}},
      {"[\\w.-]+@x", {"a.b-c@x"}, {"@x"}},
  };
  for (const Case& c : cases) {
    auto g = constraint(c.regex);
    for (const std::string& y : c.yes)
      QVERIFY2(g->matches(y), (c.regex + std::string(" ~ ") + y).c_str());
    for (const std::string& n : c.no)
      QVERIFY2(!g->matches(n), (c.regex + std::string(" !~ ") + n).c_str());
  }
}

void GrammarTest::bad_regexes_are_refused_by_name() {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"(a", "missing ')'"},
      {"a)", "unbalanced"},
      {"[a-", "unterminated"},
      {"(?=a)b", "lookaround"},
      {"(a)\\1", "backreferences"},
      {"a{5,2}", "max below min"},
      {"*a", "nothing to repeat"},
      {"a\\b", "anchor"},
      {"[^\\x00-\\x7f]\\x80{0}[]]", ""},  // compiles or not, never crashes
      {"[z-a]", "out of order"},
      {"a{100000}", "above"},
      {"(x{1000}){1000}", "automaton states"},
      {std::string(5000, '(') + std::string(5000, ')'), "nest deeper"},
  };
  for (const auto& [regex, what] : bad) {
    Result<ByteNfa> r = compile_regex(regex);
    if (what.empty()) continue;
    QVERIFY2(!r.is_ok(), regex.c_str());
    QVERIFY2(r.status().message().find(what) != std::string::npos,
             (regex + " -> " + r.status().message()).c_str());
  }
  // A JSON string pattern that can only produce a quote cannot match once quotes are removed.
  Result<std::string> r =
      json_schema_to_regex(ojson::parse("{\"type\":\"string\",\"pattern\":\"\\\"+\"}"));
  QVERIFY(!r.is_ok());
  QVERIFY2(r.status().message().find("cannot match") != std::string::npos,
           r.status().message().c_str());
}

void GrammarTest::integer_ranges_are_exact() {
  const std::vector<std::pair<long long, long long>> ranges = {
      {0, 0},    {0, 9},     {5, 123}, {-17, 4},    {-300, -21},
      {10, 999}, {99, 1001}, {-5, -5}, {1, 1000000}};
  for (const auto& [lo, hi] : ranges) {
    auto g = constraint(integer_range_regex(lo, hi));
    for (long long v = -1200; v <= 1200; ++v)
      QVERIFY2(g->matches(std::to_string(v)) == (v >= lo && v <= hi),
               (std::to_string(lo) + ".." + std::to_string(hi) + ": " + std::to_string(v)).c_str());
    QVERIFY(!g->matches("007") && !g->matches("-0") && !g->matches("+1"));
  }
}

void GrammarTest::number_bounds_hold_for_fractions() {
  auto g = constraint(schema_regex(R"({"type":"number","minimum":-2,"maximum":3})"));
  for (const char* yes : {"0", "-2", "-1.99", "3", "3.0", "2.999", "0.5", "-0.5"})
    QVERIFY2(g->matches(yes), yes);
  for (const char* no : {"3.01", "-2.5", "4", "-3", "1e3", "03"}) QVERIFY2(!g->matches(no), no);
}

void GrammarTest::schemas_data() {
  QTest::addColumn<QString>("schema");
  QTest::addColumn<QStringList>("valid");
  QTest::addColumn<QStringList>("invalid");
  auto row = [](const char* name, const char* schema, QStringList yes, QStringList no) {
    QTest::newRow(name) << QString(schema) << yes << no;
  };
  row("string", R"({"type":"string"})", {R"("hi")", "\"a\\\"b\"", "\"é\\n\""}, {"hi", "1"});
  row("integer", R"({"type":"integer"})", {"0", "-12"}, {"1.5", "01", "\"1\""});
  row("bounded integer", R"({"type":"integer","minimum":1,"maximum":120})", {"1", "120", "42"},
      {"0", "121", "-1"});
  row("exclusive integer", R"({"type":"integer","exclusiveMinimum":0,"exclusiveMaximum":10})",
      {"1", "9"}, {"0", "10"});
  row("number", R"({"type":"number"})", {"1", "-0.25", "3e5", "1.5E-3"}, {".5", "1.", "+1"});
  row("boolean or null", R"({"type":["boolean","null"]})", {"true", "null"}, {"0", "\"true\""});
  row("enum", R"({"enum":["red","green",3,null]})", {R"("red")", "3", "null"}, {R"("blue")"});
  row("const", R"({"const":{"a":1}})", {R"({"a":1})"}, {R"({"a":2})"});
  row("object required",
      R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name","age"]})",
      {R"({"name":"x","age":3})", R"({"name": "x", "age": 3})"},
      {R"({"name":"x"})", R"({"age":3,"name":"x"})", "{}"});
  row("object optional",
      R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},"c":{"type":"boolean"}},"required":["b"]})",
      {R"({"b":""})", R"({"a":1,"b":"x"})", R"({"b":"x","c":true})",
       R"({"a":1,"b":"x","c":false})"},
      {R"({"a":1})", R"({"a":1,"c":true})", "{}"});
  row("all optional",
      R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}}})",
      {"{}", R"({"a":1})", R"({"b":2})", R"({"a":1,"b":2})"}, {R"({"c":1})", R"({,"b":2})"});
  row("nested",
      R"({"type":"object","properties":{"user":{"type":"object","properties":{"id":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"}}},"required":["id","tags"]}},"required":["user"]})",
      {R"({"user":{"id":1,"tags":[]}})", R"({"user":{"id":1,"tags":["a", "b"]}})"},
      {R"({"user":{"id":1}})"});
  row("array bounds", R"({"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":3})",
      {"[1,2]", "[1, 2, 3]"}, {"[1]", "[1,2,3,4]", "[]"});
  row("array of objects",
      R"({"type":"array","items":{"type":"object","properties":{"x":{"type":"number"}},"required":["x"]}})",
      {"[]", R"([{"x":1},{"x":2.5}])"}, {R"([{"y":1}])"});
  row("tuple",
      R"({"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false})",
      {R"(["a",1])"}, {R"(["a"])", R"([1,"a"])"});
  row("string lengths", R"({"type":"string","minLength":2,"maxLength":4})",
      {R"("ab")", R"("abcd")"}, {R"("a")", R"("abcde")"});
  row("pattern", "{\"type\":\"string\",\"pattern\":\"^[A-Z]{2}-\\\\d{3}$\"}", {R"("AB-123")"},
      {R"("ab-123")", R"("AB-12")"});
  row("format date",
      R"({"type":"object","properties":{"d":{"type":"string","format":"date"}},"required":["d"]})",
      {R"({"d":"2024-02-29"})"}, {R"({"d":"2024-13-01"})"});
  row("anyOf and $ref",
      R"({"$defs":{"p":{"type":"object","properties":{"x":{"type":"integer","minimum":0}},"required":["x"]}},"anyOf":[{"$ref":"#/$defs/p"},{"type":"string"}]})",
      {R"({"x":0})", R"("s")"}, {R"({"x":-1})", "1"});
  row("free map", R"({"type":"object","additionalProperties":{"type":"integer"}})",
      {"{}", R"({"a":1,"b":2})"}, {R"({"a":"x"})"});
}

void GrammarTest::schemas() {
  QFETCH(QString, schema);
  QFETCH(QStringList, valid);
  QFETCH(QStringList, invalid);
  const std::string regex = schema_regex(schema.toStdString());
  auto g = constraint(regex);
  for (const QString& v : valid) QVERIFY2(g->matches(v.toStdString()), qPrintable(v));
  for (const QString& v : invalid) QVERIFY2(!g->matches(v.toStdString()), qPrintable(v));
  std::mt19937 rng(7);
  int ended = 0;
  for (int i = 0; i < 40; ++i) {
    auto [text, done] = walk(*g, rng, 60);
    if (!done) continue;
    ++ended;
    QVERIFY2(g->matches(text), text.c_str());
    QVERIFY2(nlohmann::json::accept(text), text.c_str());
  }
  QVERIFY(ended > 0);
}

void GrammarTest::json_object_and_choices() {
  auto g = constraint(json_object_regex());
  for (const char* yes : {"{}", R"({"a":[1,{"b":null}],"c": "d"})"}) QVERIFY2(g->matches(yes), yes);
  for (const char* no : {"[]", "1", R"({"a"})", "{\"a\":1,}"}) QVERIFY2(!g->matches(no), no);
  std::mt19937 rng(3);
  for (int i = 0; i < 40; ++i) {
    auto [text, done] = walk(*g, rng, 40);
    if (done)
      QVERIFY2(nlohmann::json::accept(text) && nlohmann::json::parse(text).is_object(),
               text.c_str());
  }
  auto c = constraint(choice_regex({"yes", "no", "a.b"}));
  QVERIFY(c->matches("yes") && c->matches("a.b") && !c->matches("axb") && !c->matches("ye"));
}

void GrammarTest::unsupported_schemas_are_refused_by_name() {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({"type":"integer","multipleOf":3})", "unsupported keyword multipleOf"},
      {R"({"type":"array","uniqueItems":true})", "uniqueItems"},
      {R"({"not":{"type":"string"}})", "unsupported keyword not"},
      {R"({"type":"object","properties":{"a":{"type":"strin"}}})",
       "/properties/a: unknown type strin"},
      {R"({"type":"number","minimum":0.5})", "whole number"},
      {R"({"type":"number","exclusiveMinimum":0})", "integers only"},
      {R"({"type":"string","format":"hostname"})", "unsupported format hostname"},
      {R"({"$ref":"#/$defs/missing"})", "points at nothing"},
      {R"({"$defs":{"n":{"type":"object","properties":{"next":{"$ref":"#/$defs/n"}}}},"$ref":"#/$defs/n"})",
       "recursive"},
      {R"({"type":"object","properties":{"a":{}},"required":["b"]})", "required property b"},
      {R"({"type":"integer","minimum":5,"maximum":1})", "no value"},
      {R"({"enum":[]})", "enum"},
      {R"(false)", "matches nothing"},
      {"{\"type\":\"string\",\"pattern\":\"(?=x)\"}", "lookaround"},
  };
  for (const auto& [schema, what] : bad) {
    Result<std::string> r = json_schema_to_regex(ojson::parse(schema));
    QVERIFY2(!r.is_ok(), schema.c_str());
    QVERIFY2(r.status().message().find(what) != std::string::npos,
             (schema + " -> " + r.status().message()).c_str());
  }
}

void GrammarTest::masks_match_brute_force() {
  const std::vector<std::string> regexes = {
      schema_regex(
          R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0,"maximum":150}},"required":["name","age"]})"),
      json_object_regex(), "(ab|abc)d?", "[0-9]{1,3}"};
  const std::vector<TokenId> end = {0};
  for (const std::string& regex : regexes) {
    auto g = constraint(regex);
    std::mt19937 rng(11);
    for (int run = 0; run < 10; ++run) {
      int32_t s = g->start();
      for (int step = 0; step < 25 && s >= 0; ++step) {
        const auto m = g->allowed(s, end);
        std::vector<TokenId> ok;
        for (TokenId t = 1; t < tokenizer().vocab_size(); ++t) {
          const bool live = g->advance(s, t) >= 0;  // walks the token's bytes, not the mask
          QVERIFY2(allowed(*m, t) == live, (regex + " token " + std::to_string(t)).c_str());
          if (live) ok.push_back(t);
        }
        QCOMPARE(allowed(*m, 0), g->accepting(s));
        if (ok.empty()) break;
        s = g->advance(s, ok[rng() % ok.size()]);
      }
    }
    QVERIFY(g->num_cached_masks() > 0);
  }
  // A dead state allows only the end ids.
  auto g = constraint("a");
  const auto m = g->allowed(TokenConstraint::kDead, end);
  QVERIFY(allowed(*m, 0));
  for (TokenId t = 1; t < tokenizer().vocab_size(); ++t) QVERIFY(!allowed(*m, t));
  const int32_t done = g->advance(g->start(), 'a');
  const auto only_end = g->allowed(done, end);
  QVERIFY(allowed(*only_end, 0) && !allowed(*only_end, 'a'));
  // Two requests sharing the grammar with different end ids (stop_token_ids): each mask allows its
  // own, whichever reached the accepting state first.
  const std::vector<TokenId> other_end = {'z'};
  const auto other = g->allowed(done, other_end);
  QVERIFY(allowed(*other, 'z') && !allowed(*other, 0));
  QVERIFY(allowed(*g->allowed(done, end), 0) && !allowed(*g->allowed(done, end), 'z'));
}

QTEST_GUILESS_MAIN(GrammarTest)
#include "grammar_test.moc"
