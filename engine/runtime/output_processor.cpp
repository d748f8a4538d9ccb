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
    : params_(params), eos_ids_(std::move(eos_ids)), stops_(params.stop) {
  if (!params_.ignore_eos) end_ids_ = eos_ids_;
  for (TokenId t : params_.stop_token_ids)
    if (!contains(end_ids_, t)) end_ids_.push_back(t);
  if (tokenizer) detok_.emplace(std::move(tokenizer), params_.skip_special_tokens);
}

std::string OutputProcessor::drain() {
  std::string text;
  if (detok_) {
    StopStringMatcher::Result r = stops_.add(detok_->finish(), num_output_ >= params_.min_tokens);
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
    d.stop_reason = contains(params_.stop_token_ids, token) ? std::to_string(token) : "eos";
    d.text = drain();
    return d;
  }
  if (detok_) {
    StopStringMatcher::Result r =
        stops_.add(detok_->push(token), num_output_ >= params_.min_tokens);
    d.text = std::move(r.text);
    if (r.matched) {
      d.finished = true;
      d.reason = FinishReason::kStop;
      d.stop_reason = std::move(r.stop);
      return d;
    }
  }
  if (num_output_ >= params_.max_tokens) {
    d.finished = true;
    d.reason = FinishReason::kLength;
    d.text += drain();
  }
  return d;
}

}  // namespace lathe
