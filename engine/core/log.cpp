#include "engine/core/log.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>

namespace lathe {
namespace {

LogLevel initial_level() {
  const char* env = std::getenv("LATHE_LOG_LEVEL");
  if (env == nullptr) return LogLevel::kInfo;
  if (std::strcmp(env, "debug") == 0) return LogLevel::kDebug;
  if (std::strcmp(env, "warning") == 0) return LogLevel::kWarning;
  if (std::strcmp(env, "error") == 0) return LogLevel::kError;
  if (std::strcmp(env, "off") == 0) return LogLevel::kOff;
  return LogLevel::kInfo;
}

struct LogState {
  std::mutex mutex;
  LogLevel level = initial_level();
  LogSink sink;
};

LogState& state() {
  static LogState s;
  return s;
}

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
    default:
      return "";
  }
}

}  // namespace

void log_message(LogLevel level, std::string_view message) {
  LogState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (level < s.level) return;
  if (s.sink) {
    s.sink(level, message);
    return;
  }
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  localtime_r(&t, &tm);
  char stamp[16];
  std::strftime(stamp, sizeof stamp, "%H:%M:%S", &tm);
  std::fprintf(stderr, "[%s] %s: %.*s\n", stamp, level_name(level),
               static_cast<int>(message.size()), message.data());
}

void set_log_level(LogLevel level) {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().level = level;
}

LogLevel log_level() {
  std::lock_guard<std::mutex> lock(state().mutex);
  return state().level;
}

void set_log_sink(LogSink sink) {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().sink = std::move(sink);
}

}  // namespace lathe
