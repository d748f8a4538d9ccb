#include "engine/server/request_stream.h"

namespace lathe {

void RequestStream::on_event(int32_t index, const StreamEvent& event) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (index < 0 || index >= num_choices()) return;
    Final& fin = finals_[static_cast<size_t>(index)];
    if (fin.finished) return;
    if (!event.text.empty() || !event.token_ids.empty() || !event.logprobs.empty() ||
        event.finished)
      pieces_.push_back(Piece{index, event.text, event.token_ids, event.logprobs, event.finished,
                              event.prompt_logprobs});
    if (event.finished) {
      fin.finished = true;
      ++num_finished_;
      fin.reason = event.finish_reason;
      fin.stop_reason = event.stop_reason;
      fin.error = event.error;
      fin.usage = event.usage;
      if (event.timeline != nullptr) {
        fin.arrival = event.timeline->arrival;
        fin.first_token = event.timeline->first_token;
        fin.finished_at = event.timeline->finished;
      }
      if (fin.finished_at == Clock::time_point{}) fin.finished_at = Clock::now();
    }
  }
  cv_.notify_all();
}

bool RequestStream::take(std::chrono::milliseconds timeout, std::vector<Piece>* out) {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait_for(lock, timeout, [&] { return all_finished() || !pieces_.empty(); });
  for (Piece& p : pieces_) out->push_back(std::move(p));
  pieces_.clear();
  return all_finished();
}

bool RequestStream::wait_finished(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait_for(lock, timeout, [&] { return all_finished(); });
  pieces_.clear();
  return all_finished();
}

RequestStream::Final RequestStream::final(int32_t index) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (index < 0 || index >= num_choices()) return Final();
  return finals_[static_cast<size_t>(index)];
}

}  // namespace lathe
