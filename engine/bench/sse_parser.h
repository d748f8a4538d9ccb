// Incremental parser for server-sent events (text/event-stream): feed it body bytes as they
// arrive, in pieces of any size; it calls back once per complete event with the event's data
// (several "data:" lines joined by "\n"). Comment lines (":" keep-alives), "event:", "id:" and
// "retry:" fields are skipped. Both \n and \r\n line ends are accepted.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace lathe {

class SseParser {
 public:
  // Return false from the callback to stop; feed() then returns false too.
  using EventCallback = std::function<bool(const std::string& data)>;
  explicit SseParser(EventCallback on_event) : on_event_(std::move(on_event)) {}

  bool feed(std::string_view bytes);
  // Delivers an event left unterminated when the stream ended.
  bool finish();

 private:
  bool line(std::string_view l);
  EventCallback on_event_;
  std::string partial_;  // an incomplete line
  std::string data_;     // the data of the event being read
  bool has_data_ = false;
};

}  // namespace lathe
