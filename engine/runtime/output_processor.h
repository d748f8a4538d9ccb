// Turns one request's generated tokens into streamed text and decides when it ends. Per token:
//   1. an end token (EOS unless ignore_eos, or one of stop_token_ids) ends it with reason stop; the
//      token counts as generated but adds no text;
//   2. otherwise the token is detokenized incrementally (IncrementalDetokenizer) and the text goes
//      through the stop-string matcher (stop strings count once min_tokens tokens exist): a match
//      ends it with reason stop, the text cut right before the stop string;
//   3. the max_tokens-th token ends it with reason length.
// Text held back (an incomplete UTF-8 character, a possible stop-string prefix) is released when
// it resolves or when the request ends. Models without a tokenizer (--load-format dummy) stream
// token ids only. Not thread-safe: one per request, on the engine thread.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/runtime/request.h"
#include "engine/runtime/stop_strings.h"
#include "engine/tokenizer/incremental_detokenizer.h"

namespace lathe {

struct OutputDelta {
  std::string text;  // new text to show
  bool finished = false;
  FinishReason reason = FinishReason::kNone;
  std::string stop_reason;  // the stop string, "eos", or the stop token id as text
};

class OutputProcessor {
 public:
  // params: the request's validated parameters (max_tokens already clamped to the context).
  // eos_ids: the model's end-of-sequence ids.
  OutputProcessor(std::shared_ptr<const Tokenizer> tokenizer, const SamplingParams& params,
                  std::vector<TokenId> eos_ids);

  OutputDelta add_token(TokenId token);
  int32_t num_output_tokens() const { return num_output_; }

  // Ids the sampler must not produce before min_tokens: EOS (unless ignore_eos) and stop ids.
  const std::vector<TokenId>& end_token_ids() const { return end_ids_; }

 private:
  std::string drain();  // releases everything held back

  // Of the request's parameters, what the processing reads after construction.
  int32_t min_tokens_ = 0;
  int32_t max_tokens_ = 0;
  std::vector<TokenId> stop_token_ids_;
  std::vector<TokenId> end_ids_;
  std::optional<IncrementalDetokenizer> detok_;
  StopStringMatcher stops_;
  int32_t num_output_ = 0;
};

}  // namespace lathe
