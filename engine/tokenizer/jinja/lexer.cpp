#include "engine/tokenizer/jinja/lexer.h"
#include "engine/tokenizer/unicode.h"

#include <cstring>

#include "engine/tokenizer/jinja/error.h"
#include "engine/tokenizer/jinja/text.h"

namespace lathe::jinja {
namespace {

bool is_ws(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_name_char(char c) {
  return is_name_start(c) || is_digit(c);
}

[[noreturn]] void syntax_error(std::string message, size_t pos) {
  throw Error(ErrorKind::kSyntax, std::move(message), pos);
}

// True when s is non-empty and all whitespace (Python's \s+ fullmatch).
bool all_space(std::string_view s) {
  if (s.empty()) return false;
  size_t i = 0;
  while (i < s.size()) {
    if (!is_space(next_code_point(s, i))) return false;
  }
  return true;
}

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      const size_t at = find_tag_start(pos_);
      if (at == std::string_view::npos) {
        emit_text(src_.substr(pos_));
        break;
      }
      std::string_view text = src_.substr(pos_, at - pos_);
      const char kind = src_[at + 1];
      size_t p = at + 2;
      const char sign = (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ? src_[p] : '\0';
      if (sign != '\0') ++p;
      text = strip_before_tag(text, sign, kind == '{');
      emit_text(text);
      line_starting_ = false;
      if (kind == '#') {
        lex_comment(at, p);
      } else if (kind == '%' && try_raw(at, p)) {
        // raw block consumed
      } else {
        lex_tag(at, p, kind == '%');
      }
    }
    Token eof;
    eof.type = TokenType::kEof;
    eof.pos = src_.size();
    tokens_.push_back(eof);
    return std::move(tokens_);
  }

 private:
  size_t find_tag_start(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string_view::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) {
        return i;
      }
    }
    return std::string_view::npos;
  }

  // Jinja2's OptionalLStrip: "-" strips all whitespace before the tag; otherwise lstrip_blocks
  // removes the indentation of a block or comment tag that starts its line.
  std::string_view strip_before_tag(std::string_view text, char sign, bool is_variable) const {
    if (sign == '-') {
      size_t end = text.size();
      // Walk back over whitespace code points (multi-byte spaces such as U+3000 included).
      while (end > 0) {
        size_t start = end - 1;
        while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
        size_t i = start;
        if (!is_space(next_code_point(text, i)) || i != end) break;
        end = start;
      }
      return text.substr(0, end);
    }
    if (sign == '+' || is_variable) return text;
    const size_t nl = text.rfind('\n');
    const size_t line_begin = nl == std::string_view::npos ? 0 : nl + 1;
    if ((line_begin > 0 || line_starting_) && all_space(text.substr(line_begin))) {
      return text.substr(0, line_begin);
    }
    return text;
  }

  void emit_text(std::string_view text) {
    if (text.empty()) return;
    Token t;
    t.type = TokenType::kText;
    t.value = std::string(text);
    t.pos = static_cast<size_t>(text.data() - src_.data());
    tokens_.push_back(std::move(t));
  }

  void emit(TokenType type, std::string value, size_t pos) {
    Token t;
    t.type = type;
    t.value = std::move(value);
    t.pos = pos;
    tokens_.push_back(std::move(t));
  }

  // After a closing "-%}" / "%}" / "+%}" (or comment end): "-" eats all following whitespace,
  // plain eats one newline (trim_blocks), "+" keeps everything.
  void after_block_end(size_t p, char sign) {
    if (sign == '-') {
      while (p < src_.size() && is_ws(src_[p])) ++p;
    } else if (sign == '\0' && p < src_.size() && src_[p] == '\n') {
      ++p;
    }
    line_starting_ = p > 0 && src_[p - 1] == '\n';
    pos_ = p;
  }

  void lex_comment(size_t start, size_t p) {
    for (size_t q = p; q + 1 < src_.size(); ++q) {
      if ((src_[q] == '-' || src_[q] == '+') && src_.compare(q + 1, 2, "#}") == 0) {
        after_block_end(q + 3, src_[q]);
        return;
      }
      if (src_.compare(q, 2, "#}") == 0) {
        after_block_end(q + 2, '\0');
        return;
      }
    }
    syntax_error("comment opened here is never closed with '#}'", start);
  }

  static size_t skip_ws(std::string_view s, size_t p) {
    while (p < s.size() && is_ws(s[p])) ++p;
    return p;
  }

  // "{% raw %}...{% endraw %}": the content is text, tags inside are not interpreted.
  bool try_raw(size_t start, size_t p) {
    size_t q = skip_ws(src_, p);
    if (src_.compare(q, 3, "raw") != 0 || (q + 3 < src_.size() && is_name_char(src_[q + 3]))) {
      return false;
    }
    q = skip_ws(src_, q + 3);
    if (src_.compare(q, 3, "-%}") == 0) {
      q = skip_ws(src_, q + 3);
    } else if (src_.compare(q, 2, "%}") == 0) {
      q += 2;
    } else {
      return false;
    }
    line_starting_ = src_[q - 1] == '\n';
    for (size_t e = src_.find("{%", q); e != std::string_view::npos; e = src_.find("{%", e + 1)) {
      size_t r = e + 2;
      const char sign = (r < src_.size() && (src_[r] == '-' || src_[r] == '+')) ? src_[r] : '\0';
      if (sign != '\0') ++r;
      r = skip_ws(src_, r);
      if (src_.compare(r, 6, "endraw") != 0) continue;
      r = skip_ws(src_, r + 6);
      char end_sign = '\0';
      if (r < src_.size() && (src_[r] == '-' || src_[r] == '+')) end_sign = src_[r++];
      if (src_.compare(r, 2, "%}") != 0) continue;
      emit_text(strip_before_tag(src_.substr(q, e - q), sign, false));
      after_block_end(r + 2, end_sign);
      return true;
    }
    syntax_error("'raw' block opened here is never closed with '{% endraw %}'", start);
  }

  void lex_tag(size_t start, size_t p, bool is_block) {
    emit(is_block ? TokenType::kBlockBegin : TokenType::kVarBegin, is_block ? "{%" : "{{", start);
    std::vector<std::pair<char, size_t>> open;  // expected closing bracket, position of opener
    while (true) {
      p = skip_ws(src_, p);
      if (p >= src_.size()) {
        syntax_error(
            std::string("tag opened here is never closed with '") + (is_block ? "%}" : "}}") + "'",
            start);
      }
      if (open.empty()) {
        if (is_block) {
          if ((src_[p] == '-' || src_[p] == '+') && src_.compare(p + 1, 2, "%}") == 0) {
            emit(TokenType::kBlockEnd, "%}", p);
            after_block_end(p + 3, src_[p]);
            return;
          }
          if (src_.compare(p, 2, "%}") == 0) {
            emit(TokenType::kBlockEnd, "%}", p);
            after_block_end(p + 2, '\0');
            return;
          }
        } else {
          const bool strip = src_[p] == '-' && src_.compare(p + 1, 2, "}}") == 0;
          if (strip || src_.compare(p, 2, "}}") == 0) {
            emit(TokenType::kVarEnd, "}}", p);
            p += strip ? 3 : 2;
            if (strip) p = skip_ws(src_, p);
            line_starting_ = src_[p - 1] == '\n';
            pos_ = p;
            return;
          }
        }
      }
      p = lex_token(p, open);
    }
  }

  size_t lex_token(size_t p, std::vector<std::pair<char, size_t>>& open) {
    const char c = src_[p];
    if (is_digit(c)) return lex_number(p);
    if (is_name_start(c)) {
      size_t e = p;
      while (e < src_.size() && is_name_char(src_[e])) ++e;
      emit(TokenType::kName, std::string(src_.substr(p, e - p)), p);
      return e;
    }
    if (c == '\'' || c == '"') return lex_string(p);
    static const char* const kTwoChar[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : kTwoChar) {
      if (src_.compare(p, 2, op) == 0) {
        emit(TokenType::kOperator, op, p);
        return p + 2;
      }
    }
    if (std::strchr("+-/*%~[](){}><=.:|,;", c) == nullptr) {
      syntax_error(std::string("unexpected character '") + c + "' in tag", p);
    }
    if (c == '(' || c == '[' || c == '{') {
      open.emplace_back(c == '(' ? ')' : (c == '[' ? ']' : '}'), p);
    } else if (c == ')' || c == ']' || c == '}') {
      if (open.empty()) syntax_error(std::string("unexpected '") + c + "'", p);
      if (open.back().first != c) {
        syntax_error(std::string("unexpected '") + c + "', expected '" + open.back().first + "'",
                     p);
      }
      open.pop_back();
    }
    emit(TokenType::kOperator, std::string(1, c), p);
    return p + 1;
  }

  // Digits with optional single underscores between them; returns the end.
  size_t scan_digits(size_t p, bool (*ok)(char)) const {
    if (p >= src_.size() || !ok(src_[p])) return p;
    size_t e = p + 1;
    while (e < src_.size()) {
      if (ok(src_[e])) {
        ++e;
      } else if (src_[e] == '_' && e + 1 < src_.size() && ok(src_[e + 1])) {
        e += 2;
      } else {
        break;
      }
    }
    return e;
  }

  size_t lex_number(size_t p) {
    auto strip_underscores = [](std::string_view s) {
      std::string out;
      for (char ch : s) {
        if (ch != '_') out += ch;
      }
      return out;
    };
    const size_t int_end = scan_digits(p, is_digit);
    const bool after_dot = p > 0 && src_[p - 1] == '.';
    if (!after_dot) {
      size_t e = int_end;
      bool is_float = false;
      if (e + 1 < src_.size() && src_[e] == '.' && is_digit(src_[e + 1])) {
        e = scan_digits(e + 1, is_digit);
        is_float = true;
      }
      if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
        size_t x = e + 1;
        if (x < src_.size() && (src_[x] == '+' || src_[x] == '-')) ++x;
        const size_t x_end = scan_digits(x, is_digit);
        if (x_end > x) {
          e = x_end;
          is_float = true;
        }
      }
      if (is_float) {
        Token t;
        t.type = TokenType::kFloat;
        t.value = strip_underscores(src_.substr(p, e - p));
        t.float_value = std::strtod(t.value.c_str(), nullptr);
        t.pos = p;
        tokens_.push_back(std::move(t));
        return e;
      }
    }
    int base = 10;
    size_t digits_begin = p;
    size_t e = int_end;
    if (src_[p] == '0' && p + 1 < src_.size()) {
      const char x = static_cast<char>(src_[p + 1] | 0x20);
      auto is_bin = [](char ch) { return ch == '0' || ch == '1'; };
      auto is_oct = [](char ch) { return ch >= '0' && ch <= '7'; };
      auto is_hex = [](char ch) {
        return is_digit(ch) || ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'f');
      };
      bool (*ok)(char) = nullptr;
      if (x == 'b') ok = is_bin, base = 2;
      if (x == 'o') ok = is_oct, base = 8;
      if (x == 'x') ok = is_hex, base = 16;
      if (ok != nullptr) {
        size_t d = p + 2;
        if (d < src_.size() && src_[d] == '_') ++d;
        const size_t end = scan_digits(d, ok);
        if (end > d) {
          digits_begin = d;
          e = end;
        } else {
          base = 10;
        }
      }
    }
    const std::string digits = strip_underscores(src_.substr(digits_begin, e - digits_begin));
    errno = 0;
    char* end_ptr = nullptr;
    const unsigned long long v = std::strtoull(digits.c_str(), &end_ptr, base);
    if (errno == ERANGE || v > static_cast<unsigned long long>(INT64_MAX)) {
      syntax_error("integer literal too large", p);
    }
    Token t;
    t.type = TokenType::kInteger;
    t.value = std::string(src_.substr(p, e - p));
    t.int_value = static_cast<int64_t>(v);
    t.pos = p;
    tokens_.push_back(std::move(t));
    return e;
  }

  // Python's "unicode-escape" decoding of a string literal's body, as Jinja2 applies it.
  size_t lex_string(size_t p) {
    const char quote = src_[p];
    std::string value;
    size_t i = p + 1;
    auto hex_value = [&](size_t at, size_t n, uint32_t& out) {
      if (at + n > src_.size()) return false;
      out = 0;
      for (size_t k = 0; k < n; ++k) {
        const char h = src_[at + k];
        uint32_t d;
        if (is_digit(h))
          d = static_cast<uint32_t>(h - '0');
        else if ((h | 0x20) >= 'a' && (h | 0x20) <= 'f')
          d = static_cast<uint32_t>((h | 0x20) - 'a' + 10);
        else
          return false;
        out = out * 16 + d;
      }
      return true;
    };
    while (true) {
      if (i >= src_.size()) syntax_error("string literal is never closed", p);
      const char c = src_[i];
      if (c == quote) break;
      if (c != '\\') {
        value += c;
        ++i;
        continue;
      }
      if (i + 1 >= src_.size()) syntax_error("string literal is never closed", p);
      const char e = src_[i + 1];
      i += 2;
      uint32_t cp = 0;
      switch (e) {
        case '\n':
          break;  // line continuation
        case '\\':
          value += '\\';
          break;
        case '\'':
          value += '\'';
          break;
        case '"':
          value += '"';
          break;
        case 'a':
          value += '\a';
          break;
        case 'b':
          value += '\b';
          break;
        case 'f':
          value += '\f';
          break;
        case 'n':
          value += '\n';
          break;
        case 'r':
          value += '\r';
          break;
        case 't':
          value += '\t';
          break;
        case 'v':
          value += '\v';
          break;
        case 'x':
        case 'u':
        case 'U': {
          const size_t n = e == 'x' ? 2 : (e == 'u' ? 4 : 8);
          if (!hex_value(i, n, cp) || cp > 0x10FFFF) {
            syntax_error(std::string("invalid \\") + e + " escape in string literal", i - 2);
          }
          unicode::append_utf8(value, static_cast<uint32_t>(cp));
          i += n;
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            cp = static_cast<uint32_t>(e - '0');
            for (int k = 0; k < 2 && i < src_.size() && src_[i] >= '0' && src_[i] <= '7'; ++k) {
              cp = cp * 8 + static_cast<uint32_t>(src_[i++] - '0');
            }
            unicode::append_utf8(value, static_cast<uint32_t>(cp));
          } else {
            value += '\\';  // unknown escapes stay as written
            value += e;
          }
      }
    }
    emit(TokenType::kString, std::move(value), p);
    return i + 1;
  }

  std::string_view src_;
  size_t pos_ = 0;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

std::string normalize_source(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

std::vector<Token> tokenize(std::string_view source) {
  return Lexer(source).run();
}

}  // namespace lathe::jinja
