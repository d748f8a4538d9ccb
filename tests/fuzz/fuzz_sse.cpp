// Fuzz target: the SSE parser of `lathe bench serve`. The first byte seeds how the body is cut
// into pieces; the events must be the same as when the body arrives in one piece.
#include <vector>

#include "engine/bench/sse_parser.h"
#include "tests/fuzz/fuzz_support.h"

using namespace lathe;

namespace {

std::vector<std::string> parse(std::string_view body, uint32_t cut_seed) {
  std::vector<std::string> events;
  SseParser parser([&](const std::string& e) {
    events.push_back(e);
    return true;
  });
  size_t pos = 0;
  uint32_t state = cut_seed | 1;
  while (pos < body.size()) {
    size_t n = body.size() - pos;
    if (cut_seed != 0) {
      state = state * 1664525u + 1013904223u;
      n = std::min<size_t>(n, 1 + (state >> 24) % 7);
    }
    LATHE_FUZZ_CHECK(parser.feed(body.substr(pos, n)));
    pos += n;
  }
  LATHE_FUZZ_CHECK(parser.finish());
  return events;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::vector<std::string> whole = parse(body, 0);
  const std::vector<std::string> pieces = parse(body, data[0] + 1u);
  LATHE_FUZZ_CHECK(whole == pieces);
  return 0;
}
