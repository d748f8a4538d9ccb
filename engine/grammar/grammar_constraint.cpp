#include "engine/grammar/grammar_constraint.h"

#include <algorithm>

namespace lathe {

Result<std::shared_ptr<GrammarConstraint>> GrammarConstraint::create(
    std::string_view regex, std::shared_ptr<const TokenVocabulary> vocabulary) {
  LATHE_ASSIGN_OR_RETURN(ByteNfa nfa, compile_regex(regex));
  return std::shared_ptr<GrammarConstraint>(
      new GrammarConstraint(std::move(nfa), std::move(vocabulary)));
}

int32_t GrammarConstraint::advance(int32_t state, TokenId token) {
  if (state < 0) return kDead;
  const std::string_view b = vocab_->bytes_of(token);
  if (b.empty()) return kDead;
  for (const char c : b) {
    state = dfa_.next(state, static_cast<uint8_t>(c));
    if (state < 0) return kDead;
  }
  return state;
}

bool GrammarConstraint::matches(std::string_view text) {
  int32_t s = dfa_.start();
  for (const char c : text) {
    s = dfa_.next(s, static_cast<uint8_t>(c));
    if (s < 0) return false;
  }
  return dfa_.accepting(s);
}

std::shared_ptr<TokenMask> GrammarConstraint::compute(int32_t state) {
  const TokenVocabulary& v = *vocab_;
  auto mask = std::make_shared<TokenMask>(static_cast<size_t>((v.vocab_size() + 31) / 32), 0u);
  if (state < 0 || !dfa_.has_exit(state)) return mask;
  // path_[d]: the state after the first d bytes of the previous token, valid for d <= alive;
  // dead_at: that token died after dead_at bytes (its prefix of dead_at bytes leads nowhere), or
  // SIZE_MAX when it did not.
  path_.assign(1, state);
  size_t alive = 0, dead_at = SIZE_MAX;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string_view b = v.bytes(i);
    const size_t lcp = v.common_prefix(i);
    if (dead_at != SIZE_MAX && lcp >= dead_at) continue;  // under a dead prefix
    size_t d = std::min(lcp, alive);
    path_.resize(d + 1);
    dead_at = SIZE_MAX;
    int32_t s = path_[d];
    for (; d < b.size(); ++d) {
      s = dfa_.next(s, static_cast<uint8_t>(b[d]));
      if (s < 0) {
        dead_at = d + 1;
        break;
      }
      path_.push_back(s);
    }
    alive = path_.size() - 1;
    if (dead_at == SIZE_MAX) {
      const TokenId t = v.id(i);
      (*mask)[static_cast<size_t>(t) >> 5] |= 1u << (t & 31);
    }
  }
  return mask;
}

std::shared_ptr<const TokenMask> GrammarConstraint::allowed(int32_t state,
                                                            std::span<const TokenId> end_ids) {
  // Requests sharing this grammar may end on different ids (their stop_token_ids), so an accepting
  // state's mask is cached per end-id list; other states' masks do not depend on it.
  const bool ends = state < 0 || dfa_.accepting(state);
  MaskKey key{state,
              ends ? std::vector<TokenId>(end_ids.begin(), end_ids.end()) : std::vector<TokenId>{}};
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  std::shared_ptr<TokenMask> mask = compute(state);
  ++num_computed_;
  if (ends)
    for (const TokenId t : end_ids)
      if (t >= 0 && t < vocab_->vocab_size())
        (*mask)[static_cast<size_t>(t) >> 5] |= 1u << (t & 31);
  if (cache_.size() < kMaxCachedMasks) cache_.emplace(std::move(key), mask);
  return mask;
}

}  // namespace lathe
