// A deterministic automaton over bytes, built lazily from a ByteNfa (subset construction): a state
// is the set of live NFA states reachable after the bytes so far. Transitions are computed the
// first time they are asked for and kept in a 256-entry row per state.
//
// Not thread-safe: one owner (a request's constraint, used on the engine thread) at a time.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <vector>

#include "engine/grammar/byte_regex.h"

namespace lathe {

class ByteDfa {
 public:
  static constexpr int32_t kDead = -1;
  // Past this many states new ones are refused (their transitions read as dead): a pathological
  // pattern degrades to fewer allowed tokens, never to unbounded memory.
  // (Each state's transition row is 1 KiB.)
  static constexpr int32_t kMaxStates = 32768;

  explicit ByteDfa(ByteNfa nfa);

  int32_t start() const { return 0; }
  // The state after `byte`, or kDead.
  int32_t next(int32_t state, uint8_t byte) {
    const int32_t t = rows_[static_cast<size_t>(state)][byte];
    if (t != kUnknown) return t;
    const int32_t n = compute(state, byte);  // may grow rows_
    rows_[static_cast<size_t>(state)][byte] = n;
    return n;
  }
  bool accepting(int32_t state) const { return accepting_[static_cast<size_t>(state)] != 0; }
  // Whether some byte leads on from `state` (else the output is complete and must end).
  bool has_exit(int32_t state);
  int32_t num_states() const { return static_cast<int32_t>(sets_.size()); }

 private:
  static constexpr int32_t kUnknown = -2;
  int32_t intern(std::vector<int32_t> set);
  void close(std::vector<int32_t>& set) const;
  int32_t compute(int32_t state, uint8_t byte);

  ByteNfa nfa_;
  std::vector<std::vector<int32_t>> sets_;
  std::vector<std::array<int32_t, 256>> rows_;
  std::vector<char> accepting_;
  std::map<std::vector<int32_t>, int32_t> ids_;
  std::vector<char> mark_;  // scratch for closures
};

}  // namespace lathe
