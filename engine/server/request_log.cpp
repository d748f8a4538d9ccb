#include "engine/server/request_log.h"

#include "engine/core/log.h"
#include "engine/core/strings.h"

namespace lathe {

std::string format_request_log_line(const RequestLogEntry& e) {
  if (e.http_status != 200)
    return strformat("%s %s %d: %s", e.id.c_str(), e.endpoint.c_str(), e.http_status,
                     e.error.c_str());
  std::string line = strformat("%s %s%s prompt=%d generated=%d", e.id.c_str(), e.endpoint.c_str(),
                               e.stream ? " stream" : "", e.prompt_tokens, e.completion_tokens);
  if (e.cached_prompt_tokens > 0) line += strformat(" cached=%d", e.cached_prompt_tokens);
  line += e.ttft_ms >= 0 ? strformat(" ttft=%.1fms", e.ttft_ms) : std::string(" ttft=-");
  line += e.tokens_per_s >= 0 ? strformat(" %.1f tok/s", e.tokens_per_s) : std::string(" -- tok/s");
  line += strformat(" e2e=%.1fms finish=%s", e.e2e_ms, e.finish_reason.c_str());
  if (e.client_disconnected) line += " (client disconnected)";
  if (!e.error.empty()) line += ": " + e.error;
  return line;
}

void RequestLog::set_callback(RequestLogCallback callback) {
  auto p = callback ? std::make_shared<const RequestLogCallback>(std::move(callback)) : nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  callback_ = std::move(p);
}

void RequestLog::record(const RequestLogEntry& entry) const {
  if (log_lines_) {
    const std::string line = format_request_log_line(entry);
    if (entry.http_status >= 500 || entry.finish_reason == "error")
      log_warning(line);
    else
      log_info(line);
  }
  std::shared_ptr<const RequestLogCallback> cb;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    cb = callback_;
  }
  if (cb) (*cb)(entry);
}

}  // namespace lathe
