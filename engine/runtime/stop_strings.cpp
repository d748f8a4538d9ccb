#include "engine/runtime/stop_strings.h"

#include <algorithm>

namespace lathe {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  stops_.erase(std::remove(stops_.begin(), stops_.end(), std::string()), stops_.end());
}

StopStringMatcher::Result StopStringMatcher::add(std::string_view text, bool check) {
  Result r;
  pending_.append(text);
  if (stops_.empty() || !check) {
    r.text = std::move(pending_);
    pending_.clear();
    return r;
  }
  size_t best = std::string::npos;
  for (const std::string& s : stops_) {
    const size_t pos = pending_.find(s);
    if (pos < best) {
      best = pos;
      r.stop = s;
    }
  }
  if (best != std::string::npos) {
    r.text = pending_.substr(0, best);
    r.matched = true;
    pending_.clear();
    return r;
  }
  // Hold back the longest suffix that is a proper prefix of a stop string.
  size_t hold = 0;
  for (const std::string& s : stops_) {
    const size_t max_k = std::min(s.size() - 1, pending_.size());
    for (size_t k = max_k; k > hold; --k) {
      if (pending_.compare(pending_.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
    }
  }
  r.text = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return r;
}

std::string StopStringMatcher::flush() {
  std::string out = std::move(pending_);
  pending_.clear();
  return out;
}

}  // namespace lathe
