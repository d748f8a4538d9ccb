// A tiny tokenizer for unit tests: token i >= 3 is the word " w<i>"; 0/1/2 are the
// special tokens <pad>, <s>, </s>; ids 100..103 spell "é" as two byte tokens and "!" and " STOP".
#pragma once

#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace lathe::test {

class FakeTokenizer : public Tokenizer {
 public:
  FakeTokenizer() {
    bos_id_ = 1;
    eos_id_ = 2;
    kind_ = "bpe";
  }
  std::vector<TokenId> encode(std::string_view text, const EncodeOptions&) const override {
    std::vector<TokenId> out;
    for (char c : text) out.push_back(3 + static_cast<unsigned char>(c) % 90);
    return out;
  }
  std::string token_bytes(TokenId id) const override {
    switch (id) {
      case 0:
        return "<pad>";
      case 1:
        return "<s>";
      case 2:
        return "</s>";
      case 100:
        return "\xc3";  // first byte of é
      case 101:
        return "\xa9";  // second byte of é
      case 102:
        return "!";
      case 103:
        return " STOP";
      default:
        return id >= 3 && id < vocab_size() ? " w" + std::to_string(id) : "";
    }
  }
  std::string decode(const std::vector<TokenId>& ids, bool skip_special) const override {
    std::string s;
    for (TokenId id : ids)
      if (!(skip_special && is_special(id))) s += token_bytes(id);
    return s;
  }
  int64_t vocab_size() const override { return 1000; }
  bool is_special(TokenId id) const override { return id >= 0 && id <= 2; }
  TokenId token_to_id(std::string_view) const override { return -1; }
};

}  // namespace lathe::test
