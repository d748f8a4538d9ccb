#include "engine/bench/sse_parser.h"

namespace lathe {

bool SseParser::feed(std::string_view bytes) {
  size_t start = 0;
  while (start < bytes.size()) {
    const size_t nl = bytes.find('\n', start);
    if (nl == std::string_view::npos) {
      partial_.append(bytes.substr(start));
      break;
    }
    std::string_view l = bytes.substr(start, nl - start);
    start = nl + 1;
    bool ok;
    if (!partial_.empty()) {
      partial_.append(l);
      std::string whole = std::move(partial_);
      partial_.clear();
      ok = line(whole);
    } else {
      ok = line(l);
    }
    if (!ok) return false;
  }
  return true;
}

bool SseParser::finish() {
  if (!partial_.empty()) {
    std::string last = std::move(partial_);
    partial_.clear();
    if (!line(last)) return false;
  }
  return line("");
}

bool SseParser::line(std::string_view l) {
  if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
  if (l.empty()) {  // end of an event
    if (!has_data_) return true;
    has_data_ = false;
    std::string data = std::move(data_);
    data_.clear();
    return on_event_(data);
  }
  if (l.front() == ':') return true;  // comment
  const size_t colon = l.find(':');
  const std::string_view field = l.substr(0, colon);
  if (field != "data") return true;
  std::string_view value =
      colon == std::string_view::npos ? std::string_view() : l.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (has_data_) data_ += '\n';
  data_.append(value);
  has_data_ = true;
  return true;
}

}  // namespace lathe
