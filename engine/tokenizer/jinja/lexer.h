// Splits a template into text and tag tokens the way Jinja2's lexer does with Hugging Face's
// settings (trim_blocks and lstrip_blocks on): "{%- ... -%}" strips whitespace around a tag,
// "{%+" / "+%}" keep it, a block or comment tag alone on its line takes its indentation and the
// newline after it with it, "{# #}" comments vanish, "{% raw %}" blocks stay text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lathe::jinja {

enum class TokenType {
  kText,        // literal template text (whitespace control already applied)
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,        // identifier or keyword
  kString,      // string literal, value unescaped
  kInteger,
  kFloat,
  kOperator,  // + - * / // % ** ~ ( ) [ ] { } == != < <= > >= = . : | , ;
  kEof,
};

struct Token {
  TokenType type = TokenType::kEof;
  std::string value;  // text, name, unescaped string or operator
  size_t pos = 0;     // byte offset in the normalised source
  int64_t int_value = 0;
  double float_value = 0.0;
};

// What Jinja2 does to a template source first: "\r\n" and "\r" become "\n", and one trailing
// newline is dropped (keep_trailing_newline=False).
std::string normalize_source(std::string_view source);

// Tokenizes a normalised source. Throws jinja::Error (kSyntax) on an unterminated tag, comment or
// string, an unexpected character, or unbalanced brackets.
std::vector<Token> tokenize(std::string_view source);

}  // namespace lathe::jinja
