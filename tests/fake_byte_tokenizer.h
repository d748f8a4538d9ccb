// A tokenizer for tests of constrained decoding: id 0 is a special end token, ids 1..255 the
// single bytes (id b is byte b), then the given multi-byte tokens. Only token_bytes() matters.
#pragma once

#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace lathe::test {

class FakeByteTokenizer final : public Tokenizer {
 public:
  explicit FakeByteTokenizer(const std::vector<std::string>& extra = {}) {
    tokens_.push_back("<eos>");
    for (int b = 1; b < 256; ++b) tokens_.push_back(std::string(1, static_cast<char>(b)));
    tokens_.insert(tokens_.end(), extra.begin(), extra.end());
    eos_id_ = 0;
  }
  std::vector<TokenId> encode(std::string_view, const EncodeOptions&) const override { return {}; }
  std::string token_bytes(TokenId id) const override { return tokens_[static_cast<size_t>(id)]; }
  std::string decode(const std::vector<TokenId>&, bool) const override { return {}; }
  int64_t vocab_size() const override { return static_cast<int64_t>(tokens_.size()); }
  bool is_special(TokenId id) const override { return id == 0; }
  TokenId token_to_id(std::string_view) const override { return -1; }

 private:
  std::vector<std::string> tokens_;
};

}  // namespace lathe::test
