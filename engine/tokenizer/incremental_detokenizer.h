// Streaming detokenization: token ids go in one at a time, text deltas come out as soon as they
// are certain. The concatenation of every push() plus finish() equals
// tokenizer.decode(all ids, skip_special). Bytes of an incomplete UTF-8 character are held back
// (at most 3) until the character completes; bytes that can no longer form a valid character
// become U+FFFD at once, so the stream never stalls. Not thread-safe: one per sequence.
#pragma once

#include <memory>
#include <string>

#include "engine/tokenizer/tokenizer.h"

namespace lathe {

class IncrementalDetokenizer {
 public:
  IncrementalDetokenizer(std::shared_ptr<const Tokenizer> tokenizer, bool skip_special);

  // Text that `id` completes (possibly empty). Ids outside the vocabulary contribute nothing.
  std::string push(TokenId id);
  // Everything still held back (an incomplete character at the end becomes U+FFFD). Call once at
  // the end of the sequence; the detokenizer is then empty and may be reused.
  std::string finish();

  // Bytes currently held back waiting for the rest of a character.
  size_t pending_bytes() const { return pending_.size(); }

 private:
  std::shared_ptr<const Tokenizer> tokenizer_;
  bool skip_special_;
  bool at_boundary_ = true;  // next text token starts the sequence or follows a special token
  std::string pending_;
};

}  // namespace lathe
