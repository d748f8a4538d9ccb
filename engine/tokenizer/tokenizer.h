// Text <-> token ids. Implementations: byte-level BPE (tokenizer.json, GGUF "gpt2" vocabularies)
// and SentencePiece (tokenizer.model, GGUF "llama" vocabularies). Immutable after loading, so
// every method is safe to call from many threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/status.h"

namespace lathe {

using TokenId = int32_t;

struct EncodeOptions {
  // Prepend BOS / append EOS when the model's tokenizer config says so (add_bos_token, ...).
  bool add_special_tokens = true;
  // Recognise special tokens written in the text ("<|im_start|>") as single tokens. Off for
  // untrusted text that must not inject control tokens.
  bool parse_special = true;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  virtual std::vector<TokenId> encode(std::string_view text,
                                      const EncodeOptions& options = {}) const = 0;

  // The exact bytes a token contributes to the output (byte-level BPE: the decoded bytes; SPM: the
  // piece with "▁" as a space and <0xNN> as its byte). Special tokens give their text
  // (e.g. "<|im_end|>"). Bytes may be an incomplete UTF-8 sequence.
  virtual std::string token_bytes(TokenId id) const = 0;

  // Decodes a whole sequence: token bytes concatenated, with the tokenizer's own cleanup (SPM drops
  // the dummy-prefix space of the first token, see strips_dummy_prefix()). skip_special drops
  // control tokens. Bytes that are not valid UTF-8 become U+FFFD (one per maximal ill-formed
  // subpart, as Python and Rust do); ids outside the vocabulary are ignored.
  virtual std::string decode(const std::vector<TokenId>& ids, bool skip_special = false) const = 0;

  // Decoding cleanup shared by decode() and IncrementalDetokenizer: when true, a token whose bytes
  // start with a space loses that space if it is the first token of the sequence or follows a
  // special token (skipped or not). SentencePiece's dummy prefix; byte-level BPE: false.
  virtual bool strips_dummy_prefix() const { return false; }

  // decode() and token_bytes() ignore ids outside [0, vocab_size()); this names the first such id
  // so callers that take ids from users (the server's /detokenize) can reject them.
  Status check_ids(const std::vector<TokenId>& ids) const {
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || ids[i] >= vocab_size()) {
        return invalid_argument("token id " + std::to_string(ids[i]) + " at position " +
                                std::to_string(i) + " is outside the vocabulary [0, " +
                                std::to_string(vocab_size()) + ")");
      }
    }
    return Status::ok();
  }

  virtual int64_t vocab_size() const = 0;
  virtual bool is_special(TokenId id) const = 0;  // control / added special tokens
  // Id of a token given its exact text (special or normal), or -1.
  virtual TokenId token_to_id(std::string_view token) const = 0;

  TokenId bos_id() const { return bos_id_; }
  TokenId eos_id() const { return eos_id_; }  // -1 when none
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  const std::string& kind() const { return kind_; }  // "bpe" or "spm"

 protected:
  TokenId bos_id_ = -1;
  TokenId eos_id_ = -1;
  bool add_bos_ = false;
  bool add_eos_ = false;
  std::string kind_;
};

}  // namespace lathe
