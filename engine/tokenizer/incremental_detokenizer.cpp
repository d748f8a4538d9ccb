#include "engine/tokenizer/incremental_detokenizer.h"

#include "engine/tokenizer/unicode.h"

namespace lathe {

IncrementalDetokenizer::IncrementalDetokenizer(std::shared_ptr<const Tokenizer> tokenizer,
                                               bool skip_special)
    : tokenizer_(std::move(tokenizer)), skip_special_(skip_special) {}

std::string IncrementalDetokenizer::push(TokenId id) {
  if (id < 0 || id >= tokenizer_->vocab_size()) return {};
  std::string bytes = tokenizer_->token_bytes(id);
  if (tokenizer_->is_special(id)) {
    at_boundary_ = true;
    if (skip_special_) return {};
  } else {
    if (at_boundary_ && tokenizer_->strips_dummy_prefix() && !bytes.empty() &&
        bytes.front() == ' ') {
      bytes.erase(0, 1);
    }
    at_boundary_ = false;
  }
  pending_ += bytes;
  std::string out;
  const size_t consumed = unicode::append_sanitized_utf8(pending_, out, false);
  pending_.erase(0, consumed);
  return out;
}

std::string IncrementalDetokenizer::finish() {
  std::string out;
  unicode::append_sanitized_utf8(pending_, out, true);
  pending_.clear();
  at_boundary_ = true;
  return out;
}

}  // namespace lathe
