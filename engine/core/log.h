// Process-wide logging. Engine code logs through these functions only; the CLI writes to stderr,
// Lathe Studio installs a sink that forwards lines to its log view. Thread-safe.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace lathe {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3, kOff = 4 };

void log_message(LogLevel level, std::string_view message);
inline void log_debug(std::string_view m) {
  log_message(LogLevel::kDebug, m);
}
inline void log_info(std::string_view m) {
  log_message(LogLevel::kInfo, m);
}
inline void log_warning(std::string_view m) {
  log_message(LogLevel::kWarning, m);
}
inline void log_error(std::string_view m) {
  log_message(LogLevel::kError, m);
}

// Messages below `level` are dropped. Default: kInfo, or
// LATHE_LOG_LEVEL=debug|info|warning|error|off.
void set_log_level(LogLevel level);
LogLevel log_level();

// Replaces the sink (default: "[time] level: message" lines on stderr). nullptr restores it.
using LogSink = std::function<void(LogLevel, std::string_view)>;
void set_log_sink(LogSink sink);

}  // namespace lathe
