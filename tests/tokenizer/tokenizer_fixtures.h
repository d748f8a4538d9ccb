// Reading the tokenizer fixtures (tests/fixtures/tokenizer, made by
// scripts/fixtures/make_tokenizer_fixtures.py) and the fetched test assets.
#pragma once

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "test_support.h"

namespace lathe::test {

struct ReferenceCase {
  std::string text;
  std::vector<TokenId> ids;             // encode(text, no BOS/EOS, parse_special)
  std::vector<TokenId> ids_no_special;  // ... without parse_special
  std::string decoded;                  // the reference's decode(ids) (HF tokenizers only)
};

struct ReferenceVocab {
  bool add_bos = false;
  bool add_eos = false;
  TokenId bos = -1;
  TokenId eos = -1;
  bool nfc = false;        // the tokenizer normalizes to NFC, so decode(encode(x)) == NFC(x)
  bool round_trip = true;  // decode(encode(x)) == x; else decode(ids) == the reference's decode
  std::vector<ReferenceCase> cases;
};

inline QJsonDocument read_json_fixture(const std::string& relative) {
  QFile f(QString::fromStdString(fixture_path(relative)));
  if (!f.open(QIODevice::ReadOnly)) return {};
  return QJsonDocument::fromJson(f.readAll());
}

inline std::vector<TokenId> to_ids(const QJsonArray& a) {
  std::vector<TokenId> ids;
  for (const auto& v : a) ids.push_back(v.toInt());
  return ids;
}

// reference_ids.json[name]; empty cases when missing.
inline ReferenceVocab reference_vocab(const std::string& name) {
  static const QJsonDocument doc = read_json_fixture("tokenizer/reference_ids.json");
  const QJsonObject o = doc.object().value(QString::fromStdString(name)).toObject();
  ReferenceVocab v;
  v.add_bos = o.value("add_bos").toBool();
  v.add_eos = o.value("add_eos").toBool();
  v.bos = o.value("bos").toInt(-1);
  v.eos = o.value("eos").toInt(-1);
  v.nfc = o.value("nfc").toBool();
  v.round_trip = o.value("round_trip").toBool(true);
  for (const auto& c : o.value("cases").toArray()) {
    const QJsonObject co = c.toObject();
    v.cases.push_back({co.value("text").toString().toStdString(), to_ids(co.value("ids").toArray()),
                       to_ids(co.value("ids_no_special").toArray()),
                       co.value("decoded").toString().toStdString()});
  }
  return v;
}

// The fetched asset folder of scripts/fetch-test-assets.sh.
inline std::string test_assets_dir() {
  if (const char* env = std::getenv("LATHE_TEST_ASSETS"); env != nullptr && *env != '\0')
    return env;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return std::string(xdg) + "/lathe/test-assets";
  }
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : ".") + "/.cache/lathe/test-assets";
}

inline std::string ids_to_string(const std::vector<TokenId>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) s.push_back(' ');
    s.append(std::to_string(ids[i]));
  }
  s.push_back(']');
  return s;
}

}  // namespace lathe::test
