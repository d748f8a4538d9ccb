// The hand-over between the engine thread, which produces a request's StreamEvents, and the
// connection thread that turns them into HTTP. The engine's callback only copies the event and
// signals; the connection thread waits, takes what arrived and writes it out.
//
// One stream serves the n choices of one HTTP request (n engine requests of one prompt, each
// delivering its events with its choice index); it is finished when every choice is.
//
// Owned through shared_ptr by both sides: the engine callbacks keep it alive after the connection
// thread has gone (a client that disconnected), until the engine's final events.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "engine/runtime/request.h"

namespace lathe {

class RequestStream {
 public:
  // New output of one choice since the last take(). The choice's final event always makes a
  // piece with last = true (possibly without text or tokens: an abort); final(index) is valid
  // from then on.
  struct Piece {
    int32_t index = 0;
    std::string text;
    std::vector<TokenId> token_ids;
    std::vector<SampledToken> logprobs;
    bool last = false;
    std::vector<SampledToken> prompt_logprobs;  // with the choice's first token (echo)
  };
  // How one choice ended (valid once its last piece was produced).
  struct Final {
    bool finished = false;
    FinishReason reason = FinishReason::kNone;
    std::string stop_reason;
    std::string error;
    RequestUsage usage;
    Clock::time_point arrival, first_token, finished_at;  // from the engine's timeline
  };

  explicit RequestStream(int32_t num_choices = 1) : finals_(static_cast<size_t>(num_choices)) {}

  int32_t num_choices() const { return static_cast<int32_t>(finals_.size()); }

  // Engine thread: the StreamCallback body of choice `index`. Never blocks for long.
  void on_event(int32_t index, const StreamEvent& event);

  // Connection thread: waits up to `timeout` for output or the end, moves new pieces into *out
  // (appending) and returns true once every choice has finished (then every piece has been taken).
  bool take(std::chrono::milliseconds timeout, std::vector<Piece>* out);
  // Waits up to `timeout` for every choice to end, dropping output; true when all have.
  bool wait_finished(std::chrono::milliseconds timeout);
  Final final(int32_t index = 0) const;

 private:
  bool all_finished() const { return num_finished_ == static_cast<int32_t>(finals_.size()); }

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<Piece> pieces_;
  std::vector<Final> finals_;
  int32_t num_finished_ = 0;
};

}  // namespace lathe
