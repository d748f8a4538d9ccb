// The TokenConstraint of a regular language (runtime/token_constraint.h): a regex compiled to a
// lazy byte DFA, walked over the vocabulary's token bytes. A token is allowed at a state when its
// bytes lead to a live state (one from which the pattern can still complete); end ids are allowed
// when the state accepts. Masks are cached per DFA state (and end ids, at accepting states); most
// steps revisit a state (inside a string, between digits), so a step usually costs a hash lookup;
// a miss walks the sorted vocabulary once, visiting each distinct prefix once and skipping every
// token under a dead one.
//
// JSON schemas, json_object, guided_choice and tool calls are regexes first
// (json_schema_regex.h); guided_regex is one already.
#pragma once

#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/core/status.h"
#include "engine/grammar/byte_dfa.h"
#include "engine/grammar/token_vocabulary.h"
#include "engine/runtime/token_constraint.h"

namespace lathe {

class GrammarConstraint final : public TokenConstraint {
 public:
  // Compiles `regex` (byte_regex.h's dialect); errors name the problem.
  static Result<std::shared_ptr<GrammarConstraint>> create(
      std::string_view regex, std::shared_ptr<const TokenVocabulary> vocabulary);

  int32_t start() const override { return dfa_.start(); }
  int32_t advance(int32_t state, TokenId token) override;
  std::shared_ptr<const TokenMask> allowed(int32_t state,
                                           std::span<const TokenId> end_ids) override;

  // Whether `state` accepts (the output so far is a complete match).
  bool accepting(int32_t state) const { return state >= 0 && dfa_.accepting(state); }
  // Whether the whole of `text` matches (for tests and checks).
  bool matches(std::string_view text);
  int32_t num_cached_masks() const { return static_cast<int32_t>(cache_.size()); }
  // Masks computed so far (cache misses: each walks the vocabulary once).
  int32_t num_masks_computed() const { return num_computed_; }
  int32_t num_dfa_states() const { return dfa_.num_states(); }

 private:
  GrammarConstraint(ByteNfa nfa, std::shared_ptr<const TokenVocabulary> vocabulary)
      : dfa_(std::move(nfa)), vocab_(std::move(vocabulary)) {}
  std::shared_ptr<TokenMask> compute(int32_t state);

  // Masks cached per DFA state, at most this many (each is vocab / 8 bytes: 16 KiB at 128k tokens,
  // so 16 MiB per grammar at most; the server keeps 8 recent grammars).
  static constexpr size_t kMaxCachedMasks = 1024;

  ByteDfa dfa_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  // A state and, for an accepting (or the dead) state, the end ids its mask allows.
  struct MaskKey {
    int32_t state;
    std::vector<TokenId> end_ids;
    bool operator==(const MaskKey&) const = default;
  };
  struct MaskKeyHash {
    size_t operator()(const MaskKey& k) const {
      size_t h = std::hash<int32_t>()(k.state);
      for (const TokenId t : k.end_ids) h = h * 1000003u ^ std::hash<TokenId>()(t);
      return h;
    }
  };
  std::unordered_map<MaskKey, std::shared_ptr<const TokenMask>, MaskKeyHash> cache_;
  std::vector<int32_t> path_;  // scratch: DFA states along the current prefix
  int32_t num_computed_ = 0;
};

}  // namespace lathe
