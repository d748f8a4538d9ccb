// Byte-level BPE (GPT-2 family: SmolLM2, Llama 3, Qwen2/3). Text is split at added tokens, then
// normalized (NFC when the model says so), pre-tokenized into pieces, and each piece's bytes are
// spelled in GPT-2's byte alphabet and merged pair by pair, lowest merge rank first.
#pragma once

#include <cstdint>

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/core/status.h"
#include "engine/tokenizer/added_tokens.h"
#include "engine/tokenizer/pretokenizer.h"
#include "engine/tokenizer/tokenizer.h"

namespace lathe {

// Limits on a BPE vocabulary (entries, token ids, added tokens) and its merges, far above any real
// tokenizer (Llama 3: 128,256 tokens and 280,147 merges; Gemma 3: 262,144 tokens), far below what
// would take minutes and gigabytes to read.
inline constexpr int64_t kMaxTokenizerTokens = int64_t{1} << 22;
inline constexpr int64_t kMaxTokenizerMerges = int64_t{1} << 21;

enum class TextNormalization { kNone, kNfc };

struct BpeTokenizerConfig {
  // Token text by id, in the byte alphabet (tokenizer.json "vocab", GGUF tokenizer.ggml.tokens).
  // Ids without a token (holes in tokenizer.json) are empty strings.
  std::vector<std::string> vocab;
  // Merges by rank: the pair of token texts whose concatenation is another token.
  std::vector<std::pair<std::string, std::string>> merges;
  // Added tokens (may reuse vocab ids, or have ids past the vocab). Their content is raw text.
  std::vector<AddedToken> added_tokens;
  PreTokenizer pre_tokenizer = PreTokenizer::gpt2();
  TextNormalization normalization = TextNormalization::kNone;
  // A piece that is a whole vocabulary token becomes that token without merging (Llama 3).
  bool ignore_merges = false;
  TokenId bos_id = -1;
  TokenId eos_id = -1;
  bool add_bos = false;
  bool add_eos = false;
  std::string source;  // names the file in error messages ("tokenizer.json", "GGUF tokenizer")
};

class BpeTokenizer final : public Tokenizer {
 public:
  // Validates the config: every merge must name two tokens of the vocabulary whose concatenation
  // is a token too; ids must be in range. Errors name `config.source` and the bad entry.
  static Result<std::shared_ptr<const BpeTokenizer>> create(BpeTokenizerConfig config);

  std::vector<TokenId> encode(std::string_view text,
                              const EncodeOptions& options = {}) const override;
  std::string token_bytes(TokenId id) const override;
  std::string decode(const std::vector<TokenId>& ids, bool skip_special = false) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(token_bytes_.size()); }
  bool is_special(TokenId id) const override;
  TokenId token_to_id(std::string_view token) const override;

  const PreTokenizer& pre_tokenizer() const { return pre_tokenizer_; }
  TextNormalization normalization() const { return normalization_; }

 private:
  BpeTokenizer() = default;

  // BPE of one pre-tokenized piece (raw bytes); appends ids to `out`. Uses and fills the cache.
  void encode_piece(std::string_view piece, std::vector<TokenId>& out) const;
  void merge_piece(std::string_view piece, std::vector<TokenId>& out) const;
  // Plain text (no added tokens): normalize, pre-tokenize, BPE.
  void encode_plain(std::string_view text, std::vector<TokenId>& out) const;

  static uint64_t pair_key(TokenId a, TokenId b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  struct MergeInfo {
    int32_t rank;
    TokenId merged;
  };

  std::unordered_map<std::string, TokenId> vocab_;  // byte-alphabet text -> id
  std::unordered_map<std::string, TokenId> added_by_content_;
  std::vector<std::string> token_bytes_;  // id -> bytes it decodes to
  std::vector<uint8_t> special_;          // id -> is a special token
  std::unordered_map<uint64_t, MergeInfo> merges_;
  TokenId byte_token_[256];               // id of each single-byte token, -1 if missing
  AddedTokenMatcher raw_matcher_;         // added tokens with normalized == false
  AddedTokenMatcher normalized_matcher_;  // added tokens with normalized == true
  PreTokenizer pre_tokenizer_;
  TextNormalization normalization_ = TextNormalization::kNone;
  bool ignore_merges_ = false;

  // Piece -> ids. Bounded: cleared when it grows past kMaxCacheEntries.
  static constexpr size_t kMaxCacheEntries = 1 << 17;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<TokenId>> cache_;
};

}  // namespace lathe
