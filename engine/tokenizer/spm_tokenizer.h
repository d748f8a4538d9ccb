// SentencePiece tokenizers (Llama 2, Mistral, ... tokenizer.model files and GGUF "llama"
// vocabularies) through libsentencepiece. Lathe adds what the library leaves to its callers:
// control tokens written in the text, BOS/EOS, byte-exact token_bytes and a decode whose
// dummy-prefix rule the incremental detokenizer can follow.
//
// Encoding: with parse_special, control and unknown pieces written in the text ("</s>") are split
// out first; each text segment between them is encoded by sentencepiece as a whole text (so each
// gets the dummy-prefix "▁", as llama.cpp and Hugging Face's Llama tokenizers do). User-defined
// pieces are matched by sentencepiece itself. Invalid UTF-8 becomes U+FFFD, as sentencepiece
// would make it.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/core/status.h"
#include "engine/tokenizer/added_tokens.h"
#include "engine/tokenizer/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace lathe {

struct SpmTokenizerOptions {
  TokenId bos_id = -1;    // -1: the model's own (trainer_spec bos_piece when it is a control piece)
  TokenId eos_id = -1;    // -1: the model's own
  std::string bos_token;  // when bos_id is -1: the piece with this text, if the model has it
  std::string eos_token;  // when eos_id is -1: likewise
  bool add_bos = true;    // llama.cpp's and Hugging Face's default for SentencePiece models
  bool add_eos = false;
  std::string source;  // names the file in errors ("tokenizer.model", "GGUF tokenizer")
};

class SpmTokenizer final : public Tokenizer {
 public:
  // `serialized_model`: a ModelProto (the bytes of a tokenizer.model file). Errors say what is
  // wrong with it, as sentencepiece reports it.
  static Result<std::shared_ptr<const SpmTokenizer>> create(std::string serialized_model,
                                                            const SpmTokenizerOptions& options);
  ~SpmTokenizer() override;

  std::vector<TokenId> encode(std::string_view text,
                              const EncodeOptions& options = {}) const override;
  std::string token_bytes(TokenId id) const override;
  std::string decode(const std::vector<TokenId>& ids, bool skip_special = false) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(token_bytes_.size()); }
  bool is_special(TokenId id) const override;
  TokenId token_to_id(std::string_view token) const override;
  bool strips_dummy_prefix() const override { return add_dummy_prefix_; }

 private:
  SpmTokenizer();

  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::vector<std::string> token_bytes_;  // id -> bytes
  std::vector<uint8_t> special_;          // control and unknown pieces
  std::unordered_map<std::string, TokenId> piece_to_id_;
  AddedTokenMatcher specials_;  // control and unknown pieces, matched in the text
  bool add_dummy_prefix_ = true;
};

}  // namespace lathe
