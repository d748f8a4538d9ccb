#include "engine/tokenizer/added_tokens.h"

#include "engine/tokenizer/unicode.h"

namespace lathe {

namespace {

// The last / first character of `s` (kInvalidCodepoint when none or not decodable).
uint32_t last_char(std::string_view s) {
  if (s.empty()) return unicode::kInvalidCodepoint;
  size_t start = s.size() - 1;
  while (start > 0 && s.size() - start < 4 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80)
    --start;
  size_t len = 0;
  const uint32_t cp = unicode::decode_utf8(s, start, &len);
  return start + len == s.size() ? cp : unicode::kInvalidCodepoint;
}

uint32_t first_char(std::string_view s) {
  if (s.empty()) return unicode::kInvalidCodepoint;
  size_t len = 0;
  return unicode::decode_utf8(s, 0, &len);
}

// Start of the whitespace run that ends `s`.
size_t trailing_space_start(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && end - start < 4 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80)
      --start;
    size_t len = 0;
    const uint32_t cp = unicode::decode_utf8(s, start, &len);
    if (start + len != end || unicode::char_class(cp) != unicode::kClassSpace) break;
    end = start;
  }
  return end;
}

// Length of the whitespace run that starts `s`.
size_t leading_space_length(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    size_t len = 0;
    const uint32_t cp = unicode::decode_utf8(s, pos, &len);
    if (unicode::char_class(cp) != unicode::kClassSpace) break;
    pos += len;
  }
  return pos;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) {
  trie_.emplace_back();
  for (AddedToken& token : tokens) {
    if (token.content.empty()) continue;
    int32_t node = 0;
    for (const char ch : token.content) {
      const auto byte = static_cast<unsigned char>(ch);
      int32_t next = child(node, byte);
      if (next < 0) {
        next = static_cast<int32_t>(trie_.size());
        trie_[node].children.emplace_back(byte, next);
        trie_.emplace_back();
      }
      node = next;
    }
    if (trie_[node].token >= 0) continue;  // duplicate content: the first one wins
    trie_[node].token = static_cast<int32_t>(tokens_.size());
    tokens_.push_back(std::move(token));
  }
}

int32_t AddedTokenMatcher::child(int32_t node, unsigned char byte) const {
  for (const auto& [b, next] : trie_[node].children) {
    if (b == byte) return next;
  }
  return -1;
}

void AddedTokenMatcher::split(std::string_view text, bool parse_special,
                              std::vector<TextSegment>& out) const {
  size_t plain_start = 0;  // start of the pending plain text
  size_t pos = 0;
  while (pos < text.size() && !tokens_.empty()) {
    // Longest token starting at pos.
    int32_t best = -1;
    size_t best_len = 0;
    int32_t node = 0;
    for (size_t k = pos; k < text.size(); ++k) {
      node = child(node, static_cast<unsigned char>(text[k]));
      if (node < 0) break;
      if (trie_[node].token >= 0) {
        best = trie_[node].token;
        best_len = k + 1 - pos;
      }
    }
    if (best < 0) {
      ++pos;
      continue;
    }
    const AddedToken& token = tokens_[best];
    size_t start = pos;
    size_t stop = pos + best_len;
    bool keep = parse_special || !token.special;
    if (keep && token.single_word) {
      const bool word_before = start > 0 && unicode::is_word_char(last_char(text.substr(0, start)));
      const bool word_after =
          stop < text.size() && unicode::is_word_char(first_char(text.substr(stop)));
      keep = !word_before && !word_after;
    }
    if (!keep) {
      pos = stop;  // the match stays plain text; matching resumes after it
      continue;
    }
    if (token.lstrip) {
      const size_t new_start = trailing_space_start(text.substr(0, start));
      start = new_start > plain_start ? new_start : plain_start;
    }
    if (token.rstrip) stop += leading_space_length(text.substr(stop));
    if (start > plain_start) out.push_back({text.substr(plain_start, start - plain_start), -1});
    out.push_back({text.substr(start, stop - start), token.id});
    plain_start = stop;
    pos = stop;
  }
  if (plain_start < text.size()) out.push_back({text.substr(plain_start), -1});
}

}  // namespace lathe
