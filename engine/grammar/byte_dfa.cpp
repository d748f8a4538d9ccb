#include "engine/grammar/byte_dfa.h"

#include <algorithm>

namespace lathe {

ByteDfa::ByteDfa(ByteNfa nfa) : nfa_(std::move(nfa)) {
  mark_.assign(nfa_.states.size(), 0);
  std::vector<int32_t> start = {nfa_.start};
  close(start);
  intern(std::move(start));
}

// Epsilon closure, keeping only live states, sorted.
void ByteDfa::close(std::vector<int32_t>& set) const {
  std::vector<char>& mark = const_cast<std::vector<char>&>(mark_);
  std::vector<int32_t> stack = set;
  set.clear();
  for (int32_t s : stack) mark[static_cast<size_t>(s)] = 1;
  std::vector<int32_t> all = stack;
  while (!stack.empty()) {
    const int32_t s = stack.back();
    stack.pop_back();
    for (int32_t t : nfa_.states[static_cast<size_t>(s)].eps)
      if (!mark[static_cast<size_t>(t)]) {
        mark[static_cast<size_t>(t)] = 1;
        stack.push_back(t);
        all.push_back(t);
      }
  }
  for (int32_t s : all) {
    mark[static_cast<size_t>(s)] = 0;
    // Only states with byte edges or the accept state matter for the future.
    const ByteNfa::State& st = nfa_.states[static_cast<size_t>(s)];
    if (nfa_.live[static_cast<size_t>(s)] && (!st.edges.empty() || s == nfa_.accept))
      set.push_back(s);
  }
  std::sort(set.begin(), set.end());
}

int32_t ByteDfa::intern(std::vector<int32_t> set) {
  if (set.empty()) return kDead;
  auto it = ids_.find(set);
  if (it != ids_.end()) return it->second;
  if (num_states() >= kMaxStates) return kDead;
  const int32_t id = num_states();
  const bool acc = std::binary_search(set.begin(), set.end(), nfa_.accept);
  ids_.emplace(set, id);
  sets_.push_back(std::move(set));
  std::array<int32_t, 256> row;
  row.fill(kUnknown);
  rows_.push_back(row);
  accepting_.push_back(acc ? 1 : 0);
  return id;
}

int32_t ByteDfa::compute(int32_t state, uint8_t byte) {
  std::vector<int32_t> next;
  for (int32_t s : sets_[static_cast<size_t>(state)])
    for (const ByteNfa::Edge& e : nfa_.states[static_cast<size_t>(s)].edges)
      if (byte >= e.lo && byte <= e.hi) next.push_back(e.to);
  std::sort(next.begin(), next.end());
  next.erase(std::unique(next.begin(), next.end()), next.end());
  close(next);
  return intern(std::move(next));
}

bool ByteDfa::has_exit(int32_t state) {
  for (int32_t s : sets_[static_cast<size_t>(state)])
    for (const ByteNfa::Edge& e : nfa_.states[static_cast<size_t>(s)].edges)
      if (nfa_.live[static_cast<size_t>(e.to)]) return true;
  return false;
}

}  // namespace lathe
