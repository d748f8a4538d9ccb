// Reading Hugging Face tokenizer files: tokenizer.json (a byte-level BPE description) and the
// special-token settings of tokenizer_config.json / special_tokens_map.json.
#pragma once

#include <cstdint>

#include <optional>
#include <string>
#include <string_view>

#include "engine/core/status.h"
#include "engine/tokenizer/bpe_tokenizer.h"

namespace lathe {

// tokenizer.json is held to kMaxTokenizerTokens and kMaxTokenizerMerges (bpe_tokenizer.h): a
// file past them is refused while it is being parsed (kCorruptFile naming the limit).
// What tokenizer.json describes.
enum class HfTokenizerJsonKind {
  kByteLevelBpe,  // model BPE with a ByteLevel pre-tokenizer: BpeTokenizer reads it
  kOther,         // e.g. a SentencePiece-style BPE (Metaspace, byte_fallback) or Unigram/WordPiece
};

// tokenizer.json, parsed once. Its kind; for kByteLevelBpe, *config receives the
// BpeTokenizerConfig: vocab, merges ("a b" strings or ["a", "b"] pairs), added_tokens with their
// flags, normalizer (NFC), pre_tokenizer (Sequence / Split with a known pattern / ByteLevel /
// Digits), model.ignore_merges, and BOS/EOS from a TemplateProcessing post-processor
// (unsupported components are kUnsupported errors that name them); for kOther, *kind_name
// receives a short description for messages ("Unigram", "BPE without ByteLevel").
// `source` prefixes every message (the file path).
Result<HfTokenizerJsonKind> parse_hf_tokenizer_json(std::string_view json_text,
                                                    const std::string& source,
                                                    BpeTokenizerConfig* config,
                                                    std::string* kind_name);

// The special-token settings of tokenizer_config.json (and special_tokens_map.json).
struct HfSpecialTokenSettings {
  std::optional<bool> add_bos_token;
  std::optional<bool> add_eos_token;
  std::optional<std::string> bos_token;  // token text; nullopt when absent or null
  std::optional<std::string> eos_token;
};
// Parses one such file; fields found in it overwrite those already in `settings`.
Status parse_hf_special_token_settings(std::string_view json_text, const std::string& source,
                                       HfSpecialTokenSettings& settings);

}  // namespace lathe
