#include "engine/tokenizer/jinja/text.h"

#include <unicode/uchar.h>
#include <unicode/ustring.h>

#include <algorithm>

#include "engine/tokenizer/unicode.h"

namespace lathe::jinja {

char32_t next_code_point(std::string_view s, size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  size_t len = 1;
  char32_t cp = b0;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
    cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    cp = b0 & 0x0F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    cp = b0 & 0x07;
  }
  if (len > 1) {
    if (i + len > s.size()) len = 1;
    for (size_t k = 1; k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xC0) != 0x80) {
        len = 1;
        break;
      }
      cp = (cp << 6) | (b & 0x3F);
    }
    if (len == 1) cp = b0;
  }
  i += len;
  return cp;
}

bool is_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

std::vector<size_t> code_point_offsets(std::string_view s) {
  std::vector<size_t> offsets;
  offsets.reserve(s.size() + 1);
  size_t i = 0;
  while (i < s.size()) {
    offsets.push_back(i);
    next_code_point(s, i);
  }
  offsets.push_back(s.size());
  return offsets;
}

size_t code_point_count(std::string_view s) {
  if (is_ascii(s)) return s.size();
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++n) next_code_point(s, i);
  return n;
}

bool is_space(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_alnum(char32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
  return u_isalnum(static_cast<UChar32>(c)) != 0;
}

namespace {

enum class CaseOp { kUpper, kLower };

std::string map_case(std::string_view s, CaseOp op) {
  if (is_ascii(s)) {
    std::string out(s);
    for (char& c : out) {
      if (op == CaseOp::kUpper && c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
      if (op == CaseOp::kLower && c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
    }
    return out;
  }
  // Code points one at a time through ICU's full mappings (e.g. "ß" -> "SS"), which never fails
  // on invalid UTF-8 (such bytes are kept).
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const size_t start = i;
    const char32_t cp = next_code_point(s, i);
    if (i - start == 1 && cp >= 0x80) {  // invalid byte
      out += s[start];
      continue;
    }
    UChar src[2];
    int32_t src_len = 0;
    U16_APPEND_UNSAFE(src, src_len, cp);
    UChar dst[8];
    UErrorCode status = U_ZERO_ERROR;
    const int32_t n = op == CaseOp::kUpper ? u_strToUpper(dst, 8, src, src_len, "", &status)
                                           : u_strToLower(dst, 8, src, src_len, "", &status);
    if (U_FAILURE(status)) {
      out.append(s.substr(start, i - start));
      continue;
    }
    for (int32_t k = 0; k < n;) {
      UChar32 c;
      U16_NEXT(dst, k, n, c);
      unicode::append_utf8(out, static_cast<uint32_t>(c));
    }
  }
  return out;
}

bool is_cased(char32_t c) {
  return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_CASED);
}

}  // namespace

std::string to_upper(std::string_view s) {
  return map_case(s, CaseOp::kUpper);
}
std::string to_lower(std::string_view s) {
  return map_case(s, CaseOp::kLower);
}

std::string capitalize(std::string_view s) {
  if (s.empty()) return {};
  size_t i = 0;
  next_code_point(s, i);
  return to_upper(s.substr(0, i)) + to_lower(s.substr(i));
}

std::string py_title(std::string_view s) {
  // Upper-cases a cased character that follows an uncased one; lower-cases the others.
  std::string out;
  bool previous_cased = false;
  size_t i = 0;
  while (i < s.size()) {
    const size_t start = i;
    const char32_t cp = next_code_point(s, i);
    const std::string_view ch = s.substr(start, i - start);
    out += previous_cased ? to_lower(ch) : to_upper(ch);
    previous_cased = is_cased(cp);
  }
  return out;
}

std::string jinja_title(std::string_view s) {
  // Jinja: "".join(w[0].upper() + w[1:].lower() for w in re.split(r"([-\s({\[<]+)", s) if w)
  auto is_sep = [](char32_t c) {
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || is_space(c);
  };
  std::string out;
  bool word_start = true;
  size_t i = 0;
  while (i < s.size()) {
    const size_t start = i;
    const char32_t cp = next_code_point(s, i);
    const std::string_view ch = s.substr(start, i - start);
    if (is_sep(cp)) {
      out += ch;
      word_start = true;
    } else {
      out += word_start ? to_upper(ch) : to_lower(ch);
      word_start = false;
    }
  }
  return out;
}

std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right) {
  std::vector<char32_t> set;
  if (chars) {
    for (size_t i = 0; i < chars->size();) set.push_back(next_code_point(*chars, i));
  }
  auto strippable = [&](char32_t c) {
    return chars ? std::find(set.begin(), set.end(), c) != set.end() : is_space(c);
  };
  const std::vector<size_t> offs = code_point_offsets(s);
  size_t b = 0;
  size_t e = offs.size() - 1;  // number of code points
  auto cp_at = [&](size_t k) {
    size_t i = offs[k];
    return next_code_point(s, i);
  };
  if (left) {
    while (b < e && strippable(cp_at(b))) ++b;
  }
  if (right) {
    while (e > b && strippable(cp_at(e - 1))) --e;
  }
  return std::string(s.substr(offs[b], offs[e] - offs[b]));
}

std::optional<std::vector<std::string>> split(std::string_view s,
                                              const std::optional<std::string>& sep,
                                              int64_t maxsplit, bool from_right) {
  std::vector<std::string> parts;
  if (sep) {
    if (sep->empty()) return std::nullopt;
    if (!from_right) {
      size_t start = 0;
      while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
        const size_t at = s.find(*sep, start);
        if (at == std::string_view::npos) break;
        parts.emplace_back(s.substr(start, at - start));
        start = at + sep->size();
      }
      parts.emplace_back(s.substr(start));
      return parts;
    }
    size_t end = s.size();
    int64_t n = 0;
    while (maxsplit < 0 || n < maxsplit) {
      if (end < sep->size()) break;
      const size_t at = s.rfind(*sep, end - sep->size());
      if (at == std::string_view::npos) break;
      parts.emplace_back(s.substr(at + sep->size(), end - at - sep->size()));
      end = at;
      ++n;
    }
    parts.emplace_back(s.substr(0, end));
    std::reverse(parts.begin(), parts.end());
    return parts;
  }
  // Whitespace split: runs of whitespace separate, leading/trailing whitespace is ignored.
  std::vector<std::pair<size_t, size_t>> words;  // byte ranges
  size_t i = 0;
  size_t word_begin = std::string_view::npos;
  while (i < s.size()) {
    const size_t start = i;
    const char32_t cp = next_code_point(s, i);
    if (is_space(cp)) {
      if (word_begin != std::string_view::npos) words.emplace_back(word_begin, start);
      word_begin = std::string_view::npos;
    } else if (word_begin == std::string_view::npos) {
      word_begin = start;
    }
  }
  if (word_begin != std::string_view::npos) words.emplace_back(word_begin, s.size());
  if (maxsplit < 0 || static_cast<int64_t>(words.size()) <= maxsplit + 1) {
    for (const auto& [b, e] : words) parts.emplace_back(s.substr(b, e - b));
    return parts;
  }
  const auto n = static_cast<size_t>(maxsplit);
  if (!from_right) {
    for (size_t k = 0; k < n; ++k)
      parts.emplace_back(s.substr(words[k].first, words[k].second - words[k].first));
    // The remainder keeps its inner and trailing whitespace, as Python does.
    parts.emplace_back(s.substr(words[n].first));
    return parts;
  }
  const size_t first_kept = words.size() - n;
  parts.emplace_back(s.substr(0, words[first_kept - 1].second));
  for (size_t k = first_kept; k < words.size(); ++k) {
    parts.emplace_back(s.substr(words[k].first, words[k].second - words[k].first));
  }
  return parts;
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  std::vector<std::string> lines;
  size_t line_start = 0;
  size_t i = 0;
  while (i < s.size()) {
    const size_t start = i;
    const char32_t cp = next_code_point(s, i);
    const bool is_break = cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C ||
                          (cp >= 0x1C && cp <= 0x1E) || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
    if (!is_break) continue;
    if (cp == '\r' && i < s.size() && s[i] == '\n') ++i;
    lines.emplace_back(s.substr(line_start, (keepends ? i : start) - line_start));
    line_start = i;
  }
  if (line_start < s.size()) lines.emplace_back(s.substr(line_start));
  return lines;
}

std::string replace(std::string_view s, std::string_view old, std::string_view repl,
                    int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts `repl` before every code point and at the end.
    int64_t n = 0;
    size_t i = 0;
    while (i < s.size()) {
      if (count < 0 || n < count) {
        out += repl;
        ++n;
      }
      const size_t start = i;
      next_code_point(s, i);
      out += s.substr(start, i - start);
    }
    if (count < 0 || n < count) out += repl;
    return out;
  }
  size_t start = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    const size_t at = s.find(old, start);
    if (at == std::string_view::npos) break;
    out += s.substr(start, at - start);
    out += repl;
    start = at + old.size();
    ++n;
  }
  out += s.substr(start);
  return out;
}

int64_t count_occurrences(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(code_point_count(s)) + 1;
  int64_t n = 0;
  for (size_t at = s.find(sub); at != std::string_view::npos; at = s.find(sub, at + sub.size())) {
    ++n;
  }
  return n;
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

namespace {

bool all_cased_are(std::string_view s, bool upper) {
  bool any_cased = false;
  size_t i = 0;
  while (i < s.size()) {
    const char32_t cp = next_code_point(s, i);
    const auto c = static_cast<UChar32>(cp);
    if (u_isUUppercase(c) || u_isULowercase(c) || u_istitle(c)) {
      any_cased = true;
      if (upper ? (u_isULowercase(c) || u_istitle(c)) : (u_isUUppercase(c) || u_istitle(c))) {
        return false;
      }
    }
  }
  return any_cased;
}

}  // namespace

bool is_lower(std::string_view s) {
  return all_cased_are(s, false);
}
bool is_upper(std::string_view s) {
  return all_cased_are(s, true);
}

}  // namespace lathe::jinja
