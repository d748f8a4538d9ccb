// The hand-over between the engine thread, which produces a request's StreamEvents, and the
// connection thread that turns them into HTTP. The engine's callback only copies the event and
// signals; the connection thread waits, takes what arrived and writes it out.
//
// Owned through shared_ptr by both sides: the engine callback keeps it alive after the connection
// thread has gone (a client that disconnected), until the engine's final event.
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
  // New output since the last take().
  struct Piece {
    std::string text;
    std::vector<TokenId> token_ids;
    std::vector<SampledToken> logprobs;
  };
  // How the request ended (valid once finished).
  struct Final {
    FinishReason reason = FinishReason::kNone;
    std::string stop_reason;
    std::string error;
    RequestUsage usage;
    Clock::time_point arrival, first_token, finished;  // from the engine's timeline
  };

  // Engine thread: the StreamCallback body. Never blocks for long.
  void on_event(const StreamEvent& event);

  // Connection thread: waits up to `timeout` for output or the end, moves new pieces into *out
  // (appending) and returns true once the request has finished (then final() is valid and every
  // piece has been taken).
  bool take(std::chrono::milliseconds timeout, std::vector<Piece>* out);
  // Waits up to `timeout` for the end, dropping output; true when finished.
  bool wait_finished(std::chrono::milliseconds timeout);
  Final final() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<Piece> pieces_;
  bool finished_ = false;
  Final final_;
};

}  // namespace lathe
