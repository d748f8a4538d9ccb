// A tokenizer's vocabulary as constrained decoding walks it: the bytes of every token that can
// appear in output text (special tokens left out), sorted bytewise so that tokens sharing a
// prefix are neighbours, with each token's common-prefix length with the one before. A walk in
// this order visits each distinct prefix once (the XGrammar / llama.cpp sorted-vocabulary trick).
//
// Immutable once built (safe to share between threads); building walks the whole vocabulary, so
// owners build it once per tokenizer (the API server on its first constrained request).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace lathe {

class TokenVocabulary {
 public:
  explicit TokenVocabulary(const Tokenizer& tokenizer);

  int64_t vocab_size() const { return vocab_size_; }
  size_t size() const { return ids_.size(); }  // walkable tokens
  TokenId id(size_t i) const { return ids_[i]; }
  std::string_view bytes(size_t i) const {
    return std::string_view(data_).substr(offsets_[i], offsets_[i + 1] - offsets_[i]);
  }
  uint32_t common_prefix(size_t i) const { return lcp_[i]; }  // with token i - 1 (0 for i = 0)
  // Bytes of token `id` (any id in [0, vocab_size)); empty for special tokens.
  std::string_view bytes_of(TokenId id) const;

 private:
  int64_t vocab_size_ = 0;
  std::vector<TokenId> ids_;       // sorted by bytes
  std::string data_;               // the sorted tokens' bytes, concatenated
  std::vector<uint32_t> offsets_;  // size() + 1
  std::vector<uint32_t> lcp_;
  std::vector<int32_t> rank_;  // id -> index into ids_, -1 for special tokens
};

}  // namespace lathe
