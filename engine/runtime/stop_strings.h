// Stop strings over streamed text. Text is appended as it is decoded; the matcher says what can be
// shown now. A tail that could still grow into a stop string is held back until it resolves, so a
// client never sees part of a stop string, and the output ends right before the first match (the
// stop string itself is not shown, as in OpenAI's API).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace lathe {

class StopStringMatcher {
 public:
  explicit StopStringMatcher(std::vector<std::string> stops);

  struct Result {
    std::string text;  // safe to show now
    bool matched = false;
    std::string stop;  // the stop string that matched
  };

  // Appends `text`. check = false appends without matching (min_tokens not reached yet).
  Result add(std::string_view text, bool check = true);
  // Releases the held-back tail (at the end of the stream).
  std::string flush();
  bool empty() const { return stops_.empty(); }

 private:
  std::vector<std::string> stops_;
  std::string pending_;  // held back: a suffix that is a proper prefix of some stop string
};

}  // namespace lathe
