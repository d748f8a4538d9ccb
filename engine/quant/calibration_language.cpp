#include "engine/quant/calibration_language.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "engine/core/read_file.h"
#include "engine/core/strings.h"
#include "engine/model/gguf_file.h"

namespace lathe {
namespace fs = std::filesystem;

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim_field(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\"'");
  if (b == std::string_view::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r\"'");
  return std::string(s.substr(b, e - b + 1));
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

bool is_english_tag(const std::string& l) {
  return l == "en" || l == "english" || starts_with(l, "en-") || starts_with(l, "en_");
}

// The `language:` entries of a model card's YAML front matter ("language: en", "language: [en,
// fr]" or a "- en" list below it).
std::vector<std::string> readme_languages(const std::string& text) {
  std::vector<std::string> out;
  if (!starts_with(text, "---")) return out;
  const size_t end = text.find("\n---", 3);
  const std::vector<std::string> lines =
      split(text.substr(0, end == std::string::npos ? text.size() : end), '\n');
  for (size_t i = 0; i < lines.size(); ++i) {
    if (!starts_with(lines[i], "language:")) continue;
    std::string rest = trim_field(std::string_view(lines[i]).substr(9));
    if (!rest.empty()) {
      if (rest.front() == '[') rest = rest.substr(1, rest.find(']') - 1);
      for (const std::string& p : split(rest, ','))
        if (!trim_field(p).empty()) out.push_back(lower(trim_field(p)));
      return out;
    }
    for (size_t j = i + 1; j < lines.size(); ++j) {
      const std::string item = trim_field(lines[j]);
      if (item.empty() || item[0] != '-') break;
      const std::string lang = trim_field(std::string_view(item).substr(1));
      if (!lang.empty()) out.push_back(lower(lang));
    }
    return out;
  }
  return out;
}

}  // namespace

bool has_non_english_letter(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    int len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (len == 0 || i + len > s.size()) {  // a stray or partial byte (byte-level BPE pieces)
      ++i;
      continue;
    }
    uint32_t cp = len == 1 ? b : b & (0x7f >> len);
    bool whole = true;
    for (int k = 1; k < len; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if ((c >> 6) != 2) whole = false;
      cp = (cp << 6) | (c & 0x3f);
    }
    if (!whole) {
      ++i;
      continue;
    }
    if (cp >= 0xC0 && !(cp >= 0x2000 && cp < 0x2C00)) return true;
    i += static_cast<size_t>(len);
  }
  return false;
}

VocabLanguageShare vocab_language_share(const std::vector<std::string>& token_bytes) {
  VocabLanguageShare v;
  for (const std::string& t : token_bytes) {
    ++v.tokens;
    if (has_non_english_letter(t)) ++v.non_english;
  }
  return v;
}

VocabLanguageShare vocab_language_share(const Tokenizer& tok) {
  VocabLanguageShare v;
  for (TokenId id = 0; id < tok.vocab_size(); ++id) {
    if (tok.is_special(id)) continue;
    ++v.tokens;
    if (has_non_english_letter(tok.token_bytes(id))) ++v.non_english;
  }
  return v;
}

std::vector<std::string> declared_languages(const QuantSource& source) {
  std::vector<std::string> out;
  if (source.is_gguf()) {
    if (source.gguf()->find("general.languages") == nullptr) return out;
    Result<std::vector<std::string>> langs = source.gguf()->get_string_array("general.languages");
    if (!langs.is_ok()) return out;  // not a string array: as if absent
    for (const std::string& l : langs.value())
      if (!trim_field(l).empty()) out.push_back(lower(trim_field(l)));
    return out;
  }
  const fs::path readme = fs::path(source.hf_folder()) / "README.md";
  std::error_code ec;
  if (!fs::is_regular_file(readme, ec)) return out;
  Result<std::string> text = read_file(readme.string());
  return text.is_ok() ? readme_languages(text.value()) : out;
}

CalibrationChoice choose_default_calibration(const std::vector<std::string>& languages,
                                             const VocabLanguageShare& vocab,
                                             const std::string& text_dir) {
  CalibrationChoice c;
  std::string why;
  if (!languages.empty()) {
    c.english = std::all_of(languages.begin(), languages.end(), is_english_tag);
    why = "the model declares language" + std::string(languages.size() > 1 ? "s " : " ") +
          join(languages);
  } else {
    c.english = vocab.share() < kEnglishOnlyMaxShare;
    why = strformat(
        "%.1f%% of its vocabulary's %lld tokens hold letters outside English's "
        "alphabet (English-only below %.0f%%)",
        100.0 * vocab.share(), static_cast<long long>(vocab.tokens), 100.0 * kEnglishOnlyMaxShare);
  }
  const std::string full = text_dir + "/calibration.txt", en = text_dir + "/calibration-en.txt";
  std::error_code ec;
  if (c.english && !fs::is_regular_file(en, ec)) {
    c.english = false;
    c.path = full;
    c.reason = "the built-in multilingual set, although the model looks English-only (" + why +
               "): " + en +
               " is missing; run scripts/fetch-eval-text.sh to get it, or pass --calibration";
    return c;
  }
  c.path = c.english ? en : full;
  c.reason = c.english ? "the built-in English set (calibration-en.txt): " + why
                       : "the built-in multilingual set (calibration.txt): " + why;
  return c;
}

}  // namespace lathe
