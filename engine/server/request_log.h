// The server's request log: one entry per generation request, finished or rejected. Each entry
// becomes a log line ("chatcmpl-1a2b.. 200 prompt=25 generated=64 ttft=38.1ms 61.3 tok/s
// finish=stop") and goes to an optional callback (Lathe Studio's request table).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

namespace lathe {

struct RequestLogEntry {
  std::chrono::system_clock::time_point time;  // when the request finished (or was rejected)
  std::string id;                              // "chatcmpl-..." / "cmpl-..." as the client saw it
  std::string endpoint;                        // "/v1/chat/completions" or "/v1/completions"
  int http_status = 200;                       // 4xx/5xx: rejected before generating (see error)
  bool stream = false;
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_prompt_tokens = 0;
  double ttft_ms = -1;  // arrival at the engine -> first token; -1 when none
  double e2e_ms = 0;    // request received -> finished
  double tokens_per_s =
      -1;  // decode rate: (completion_tokens - 1) / (finish - first token); -1 if < 2 tokens
  std::string finish_reason;  // "stop", "length", "abort", "error"; "" when rejected
  std::string error;          // why it was rejected or failed
  bool client_disconnected = false;
};

// One line, as `lathe serve` prints it.
std::string format_request_log_line(const RequestLogEntry& entry);

using RequestLogCallback = std::function<void(const RequestLogEntry&)>;

// Thread-safe: record() is called from connection threads; the callback may be swapped any time.
class RequestLog {
 public:
  void set_callback(RequestLogCallback callback);
  void set_log_lines(bool enabled) { log_lines_ = enabled; }
  // Logs the line (info; warning for 5xx) and calls the callback, outside any lock.
  void record(const RequestLogEntry& entry) const;

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<const RequestLogCallback> callback_;
  std::atomic<bool> log_lines_{true};
};

}  // namespace lathe
