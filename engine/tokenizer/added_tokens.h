// Added and special tokens written in the text ("<|im_start|>"): found before any other
// tokenization, leftmost first and longest at a position, with tokenizer.json's flags applied as
// Hugging Face tokenizers applies them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lathe {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;     // a control token: matched only with parse_special, skippable in decode
  bool lstrip = false;      // the match swallows whitespace on its left
  bool rstrip = false;      // ... and on its right
  bool normalized = false;  // matched against normalized text (after NFC, when the model has it)
  bool single_word = false;  // matched only when no word character touches it
};

// One piece of a text split at added tokens: a run of plain text, or one added token.
struct TextSegment {
  std::string_view text;  // plain text (token_id < 0) or the matched bytes
  int32_t token_id = -1;
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  // `tokens` with an empty content are ignored.
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);

  bool empty() const { return tokens_.empty(); }

  // Splits `text` at the tokens' matches. Leftmost-longest, non-overlapping matches are found
  // first; a match that single_word rejects, or of a special token when !parse_special, is then
  // dropped and stays plain text. lstrip/rstrip extend a match over adjacent Unicode whitespace
  // (never into the previous match). Appends to `out`; plain segments are never empty.
  void split(std::string_view text, bool parse_special, std::vector<TextSegment>& out) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;  // byte -> node index
    int32_t token = -1;                                       // index into tokens_
  };
  int32_t child(int32_t node, unsigned char byte) const;

  std::vector<AddedToken> tokens_;
  std::vector<Node> trie_;
};

}  // namespace lathe
