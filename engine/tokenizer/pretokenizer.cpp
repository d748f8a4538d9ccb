#include "engine/tokenizer/pretokenizer.h"

#include <cstdint>

#include "engine/tokenizer/unicode.h"

namespace lathe {

namespace {

using unicode::CharClass;

struct Char {
  uint32_t cp;
  uint32_t offset;  // byte offset in the piece
  CharClass cls;
};

// The characters of `text`, plus a sentinel whose offset is text.size().
void decode_chars(std::string_view text, std::vector<Char>& chars) {
  chars.clear();
  size_t pos = 0;
  while (pos < text.size()) {
    size_t len = 0;
    const uint32_t cp = unicode::decode_utf8(text, pos, &len);
    chars.push_back({cp, static_cast<uint32_t>(pos), unicode::char_class(cp)});
    pos += len;
  }
  chars.push_back({0, static_cast<uint32_t>(text.size()), unicode::kClassOther});
}

bool is_newline(uint32_t cp) {
  return cp == '\r' || cp == '\n';
}

// Case-insensitive comparison used by (?i:...): ASCII letters plus the one non-ASCII character
// that folds onto a letter of the contractions (U+017F LATIN SMALL LETTER LONG S folds to 's').
bool equals_folded(uint32_t cp, char lower, bool ignore_case) {
  if (cp == static_cast<uint32_t>(lower)) return true;
  if (!ignore_case) return false;
  if (cp == static_cast<uint32_t>(lower - 'a' + 'A')) return true;
  return lower == 's' && cp == 0x017F;
}

// 's|'t|'re|'ve|'m|'ll|'d at chars[i]; the number of characters matched or 0.
size_t match_contraction(const std::vector<Char>& c, size_t i, size_t n, bool ignore_case) {
  if (c[i].cp != '\'' || i + 1 >= n) return 0;
  static constexpr const char* kSuffixes[] = {"s", "t", "re", "ve", "m", "ll", "d"};
  for (const char* suffix : kSuffixes) {
    size_t k = 0;
    while (suffix[k] != '\0' && i + 1 + k < n &&
           equals_folded(c[i + 1 + k].cp, suffix[k], ignore_case))
      ++k;
    if (suffix[k] == '\0') return 1 + k;
  }
  return 0;
}

// End (exclusive, in characters) of the run of characters of class `cls` starting at i.
size_t run_end(const std::vector<Char>& c, size_t i, size_t n, CharClass cls) {
  while (i < n && c[i].cls == cls) ++i;
  return i;
}

// \s+(?!\S) and \s+ at a whitespace character i: the match end.
size_t match_whitespace_tail(const std::vector<Char>& c, size_t i, size_t n) {
  const size_t end = run_end(c, i, n, unicode::kClassSpace);
  // \s+(?!\S): the whole run at the end of the text, else all but its last character.
  if (end == n || end - i >= 2) return end == n ? end : end - 1;
  return end;  // \s+
}

// GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
size_t match_gpt2(const std::vector<Char>& c, size_t i, size_t n) {
  if (const size_t k = match_contraction(c, i, n, false)) return i + k;
  const size_t j = (c[i].cp == ' ' && i + 1 < n) ? i + 1 : i;
  switch (c[j].cls) {
    case unicode::kClassLetter:
    case unicode::kClassNumber:
    case unicode::kClassOther:
      if (j == i && c[i].cls == unicode::kClassSpace) break;
      return run_end(c, j, n, c[j].cls);
    case unicode::kClassSpace:
      break;
  }
  return match_whitespace_tail(c, i, n);
}

// Llama 3 (digit_limit 3) and Qwen2 (digit_limit 1):
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max}| ?[^\s\p{L}\p{N}]+[\r\n]*|
// \s*[\r\n]+|\s+(?!\S)|\s+
size_t match_llama3(const std::vector<Char>& c, size_t i, size_t n, size_t digit_limit) {
  if (const size_t k = match_contraction(c, i, n, true)) return i + k;
  const Char& ch = c[i];
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (ch.cls == unicode::kClassLetter) return run_end(c, i, n, unicode::kClassLetter);
  if (ch.cls != unicode::kClassNumber && !is_newline(ch.cp) && i + 1 < n &&
      c[i + 1].cls == unicode::kClassLetter) {
    return run_end(c, i + 1, n, unicode::kClassLetter);
  }
  // \p{N}{1,max}
  if (ch.cls == unicode::kClassNumber) {
    size_t end = i;
    while (end < n && end - i < digit_limit && c[end].cls == unicode::kClassNumber) ++end;
    return end;
  }
  //  ?[^\s\p{L}\p{N}]+[\r\n]*
  const size_t j = (ch.cp == ' ' && i + 1 < n) ? i + 1 : i;
  if (c[j].cls == unicode::kClassOther) {
    size_t end = run_end(c, j, n, unicode::kClassOther);
    while (end < n && is_newline(c[end].cp)) ++end;
    return end;
  }
  // ch is whitespace here. \s*[\r\n]+: up to and including the last newline of the run.
  const size_t ws_end = run_end(c, i, n, unicode::kClassSpace);
  for (size_t k = ws_end; k > i; --k) {
    if (is_newline(c[k - 1].cp)) return k;
  }
  return match_whitespace_tail(c, i, n);
}

size_t match_rule(SplitRule rule, const std::vector<Char>& c, size_t i, size_t n) {
  switch (rule) {
    case SplitRule::kGpt2:
      return match_gpt2(c, i, n);
    case SplitRule::kLlama3:
      return match_llama3(c, i, n, 3);
    case SplitRule::kQwen2:
      return match_llama3(c, i, n, 1);
  }
  return n;
}

void split_rule_into(std::string_view text, SplitRule rule, std::vector<Char>& chars,
                     std::vector<std::string_view>& out) {
  decode_chars(text, chars);
  const size_t n = chars.size() - 1;
  size_t i = 0;
  while (i < n) {
    size_t end = match_rule(rule, chars, i, n);
    if (end <= i) end = i + 1;  // cannot happen for these rules; guarantees progress
    out.push_back(text.substr(chars[i].offset, chars[end].offset - chars[i].offset));
    i = end;
  }
}

void split_digits_into(std::string_view text, bool individual, std::vector<Char>& chars,
                       std::vector<std::string_view>& out) {
  decode_chars(text, chars);
  const size_t n = chars.size() - 1;
  size_t i = 0;
  while (i < n) {
    size_t end = i + 1;
    const bool digit = chars[i].cls == unicode::kClassNumber;
    if (!digit || !individual) {
      while (end < n && (chars[end].cls == unicode::kClassNumber) == digit) ++end;
    }
    out.push_back(text.substr(chars[i].offset, chars[end].offset - chars[i].offset));
    i = end;
  }
}

}  // namespace

const char* split_rule_name(SplitRule rule) {
  switch (rule) {
    case SplitRule::kGpt2:
      return "gpt2";
    case SplitRule::kLlama3:
      return "llama3";
    case SplitRule::kQwen2:
      return "qwen2";
  }
  return "?";
}

namespace {
// The patterns as tokenizer.json files spell them (first), and llama.cpp's equivalent spellings.
constexpr std::string_view kGpt2Patterns[] = {
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)",
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))",
};
constexpr std::string_view kLlama3Patterns[] = {
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
};
constexpr std::string_view kQwen2Patterns[] = {
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
};
}  // namespace

std::optional<SplitRule> split_rule_from_pattern(std::string_view pattern) {
  for (std::string_view p : kGpt2Patterns)
    if (p == pattern) return SplitRule::kGpt2;
  for (std::string_view p : kLlama3Patterns)
    if (p == pattern) return SplitRule::kLlama3;
  for (std::string_view p : kQwen2Patterns)
    if (p == pattern) return SplitRule::kQwen2;
  return std::nullopt;
}

std::string_view split_rule_pattern(SplitRule rule) {
  switch (rule) {
    case SplitRule::kGpt2:
      return kGpt2Patterns[0];
    case SplitRule::kLlama3:
      return kLlama3Patterns[0];
    case SplitRule::kQwen2:
      return kQwen2Patterns[0];
  }
  return kGpt2Patterns[0];
}

PreTokenizer PreTokenizer::gpt2() {
  return PreTokenizer({{PreTokenizerStep::Kind::kByteLevel, SplitRule::kGpt2, false, false, true}});
}

PreTokenizer PreTokenizer::llama3() {
  return PreTokenizer(
      {{PreTokenizerStep::Kind::kSplit, SplitRule::kLlama3, false, false, true},
       {PreTokenizerStep::Kind::kByteLevel, SplitRule::kGpt2, false, false, false}});
}

PreTokenizer PreTokenizer::qwen2() {
  return PreTokenizer(
      {{PreTokenizerStep::Kind::kSplit, SplitRule::kQwen2, false, false, true},
       {PreTokenizerStep::Kind::kByteLevel, SplitRule::kGpt2, false, false, false}});
}

PreTokenizer PreTokenizer::smollm2() {
  return PreTokenizer({{PreTokenizerStep::Kind::kDigits, SplitRule::kGpt2, true, false, true},
                       {PreTokenizerStep::Kind::kByteLevel, SplitRule::kGpt2, false, false, true}});
}

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& out,
                         std::deque<std::string>& storage) const {
  if (text.empty()) return;
  std::vector<std::string_view> pieces{text};
  std::vector<std::string_view> next;
  std::vector<Char> chars;
  for (const PreTokenizerStep& step : steps_) {
    next.clear();
    for (std::string_view piece : pieces) {
      switch (step.kind) {
        case PreTokenizerStep::Kind::kSplit:
          split_rule_into(piece, step.rule, chars, next);
          break;
        case PreTokenizerStep::Kind::kDigits:
          split_digits_into(piece, step.individual_digits, chars, next);
          break;
        case PreTokenizerStep::Kind::kByteLevel:
          if (step.add_prefix_space && piece.front() != ' ') {
            storage.push_back(" ");
            storage.back().append(piece);
            piece = storage.back();
          }
          if (step.use_regex) {
            split_rule_into(piece, SplitRule::kGpt2, chars, next);
          } else {
            next.push_back(piece);
          }
          break;
      }
    }
    pieces.swap(next);
  }
  out.insert(out.end(), pieces.begin(), pieces.end());
}

std::vector<std::string_view> split_with_rule(std::string_view text, SplitRule rule) {
  std::vector<std::string_view> out;
  std::vector<Char> chars;
  split_rule_into(text, rule, chars, out);
  return out;
}

}  // namespace lathe
