#include "engine/runtime/output_processor.h"

#include <algorithm>

namespace lathe {

namespace {
bool contains(const std::vector<TokenId>& v, TokenId t) {
  return std::find(v.begin(), v.end(), t) != v.end();
}
}  // namespace

OutputProcessor::OutputProcessor(std::shared_ptr<const Tokenizer> tokenizer,
                                 const SamplingParams& params, std::vector<TokenId> eos_ids)
    : min_tokens_(params.min_tokens),
      max_tokens_(params.max_tokens),
      stop_token_ids_(params.stop_token_ids),
      stops_(params.stop) {
  if (!params.ignore_eos) end_ids_ = std::move(eos_ids);
  for (TokenId t : stop_token_ids_)
    if (!contains(end_ids_, t)) end_ids_.push_back(t);
  if (tokenizer) detok_.emplace(std::move(tokenizer), params.skip_special_tokens);
}

std::string OutputProcessor::drain() {
  std::string text;
  if (detok_) {
    StopStringMatcher::Result r = stops_.add(detok_->finish(), num_output_ >= min_tokens_);
    text = std::move(r.text);
    if (r.matched) return text;
  }
  return text + stops_.flush();
}

OutputDelta OutputProcessor::add_token(TokenId token) {
  OutputDelta d;
  ++num_output_;
  if (contains(end_ids_, token)) {
    d.finished = true;
    d.reason = FinishReason::kStop;
    d.stop_reason = contains(stop_token_ids_, token) ? std::to_string(token) : "eos";
    d.text = drain();
    return d;
  }
  if (detok_) {
    StopStringMatcher::Result r = stops_.add(detok_->push(token), num_output_ >= min_tokens_);
    d.text = std::move(r.text);
    if (r.matched) {
      d.finished = true;
      d.reason = FinishReason::kStop;
      d.stop_reason = std::move(r.stop);
      return d;
    }
  }
  if (num_output_ >= max_tokens_) {
    d.finished = true;
    d.reason = FinishReason::kLength;
    d.text += drain();
  }
  return d;
}

}  // namespace lathe
