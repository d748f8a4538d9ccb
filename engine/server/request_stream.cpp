#include "engine/server/request_stream.h"

namespace lathe {

void RequestStream::on_event(const StreamEvent& event) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (finished_) return;
    if (!event.text.empty() || !event.token_ids.empty() || !event.logprobs.empty())
      pieces_.push_back(Piece{event.text, event.token_ids, event.logprobs});
    if (event.finished) {
      finished_ = true;
      final_.reason = event.finish_reason;
      final_.stop_reason = event.stop_reason;
      final_.error = event.error;
      final_.usage = event.usage;
      if (event.timeline != nullptr) {
        final_.arrival = event.timeline->arrival;
        final_.first_token = event.timeline->first_token;
        final_.finished = event.timeline->finished;
      }
      if (final_.finished == Clock::time_point{}) final_.finished = Clock::now();
    }
  }
  cv_.notify_all();
}

bool RequestStream::take(std::chrono::milliseconds timeout, std::vector<Piece>* out) {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait_for(lock, timeout, [&] { return finished_ || !pieces_.empty(); });
  for (Piece& p : pieces_) out->push_back(std::move(p));
  pieces_.clear();
  return finished_;
}

bool RequestStream::wait_finished(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait_for(lock, timeout, [&] { return finished_; });
  pieces_.clear();
  return finished_;
}

RequestStream::Final RequestStream::final() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return final_;
}

}  // namespace lathe
