#include "engine/grammar/token_vocabulary.h"

#include <algorithm>

namespace lathe {

TokenVocabulary::TokenVocabulary(const Tokenizer& tokenizer) : vocab_size_(tokenizer.vocab_size()) {
  std::vector<std::string> all(static_cast<size_t>(vocab_size_));
  std::vector<TokenId> ids;
  for (TokenId t = 0; t < vocab_size_; ++t) {
    if (tokenizer.is_special(t)) continue;
    all[static_cast<size_t>(t)] = tokenizer.token_bytes(t);
    if (!all[static_cast<size_t>(t)].empty()) ids.push_back(t);
  }
  std::sort(ids.begin(), ids.end(), [&](TokenId a, TokenId b) {
    const std::string& x = all[static_cast<size_t>(a)];
    const std::string& y = all[static_cast<size_t>(b)];
    return x < y || (x == y && a < b);
  });
  ids_ = ids;
  offsets_.push_back(0);
  lcp_.reserve(ids.size());
  rank_.assign(static_cast<size_t>(vocab_size_), -1);
  std::string_view prev;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string& b = all[static_cast<size_t>(ids[i])];
    size_t l = 0;
    while (l < prev.size() && l < b.size() && prev[l] == b[l]) ++l;
    lcp_.push_back(static_cast<uint32_t>(i == 0 ? 0 : l));
    data_ += b;
    offsets_.push_back(static_cast<uint32_t>(data_.size()));
    rank_[static_cast<size_t>(ids[i])] = static_cast<int32_t>(i);
    prev = b;
  }
}

std::string_view TokenVocabulary::bytes_of(TokenId id) const {
  if (id < 0 || id >= vocab_size_) return {};
  const int32_t r = rank_[static_cast<size_t>(id)];
  return r < 0 ? std::string_view() : bytes(static_cast<size_t>(r));
}

}  // namespace lathe
