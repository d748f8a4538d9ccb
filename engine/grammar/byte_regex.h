// A regular expression compiled to a byte-level NFA (Thompson construction), the first stage of
// constrained decoding (grammar_constraint.h).
//
// The dialect is the common subset of Python's `re` and ECMAScript that JSON schemas and vLLM's
// guided_regex use: literals (UTF-8 text is a byte sequence), `.` (any character but \n), classes
// `[a-z_]` and `[^...]` (negated classes and `.` match every non-ASCII character as one UTF-8
// sequence; listed members must be ASCII in a negated class), escapes \d \w \s \D \W \S \n \r \t
// \f \v \xHH \uHHHH and escaped punctuation, groups `( )` and `(?: )`, alternation `|`, and the
// quantifiers * + ? {m} {m,} {m,n} (lazy forms `*?` match the same language). The whole output
// must match: `^` at the start and `$` at the end are accepted and mean nothing more. Groups nest
// at most 256 deep.
// `(?J:...)` is Lathe's own group: its strings lose every quote, backslash and control byte (a
// JSON schema's pattern inside a JSON string). Refused by name: backreferences, lookaround, named
// groups, anchors inside, inline flags.
//
// States that cannot reach the accepting state are pruned, so any non-empty set of NFA states can
// still complete; a regex whose start cannot reach it (e.g. `[^\x00-\x{10FFFF}]`) "cannot match".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/status.h"

namespace lathe {

struct ByteNfa {
  struct Edge {
    uint8_t lo = 0, hi = 0;  // byte range, inclusive
    int32_t to = 0;
  };
  struct State {
    std::vector<Edge> edges;
    std::vector<int32_t> eps;  // epsilon moves
  };
  std::vector<State> states;
  int32_t start = 0;
  int32_t accept = 0;
  std::vector<char> live;  // per state: can reach `accept`
};

// Most NFA states a regex may compile to (bounded repetition copies its operand).
inline constexpr int32_t kMaxNfaStates = 400000;

// Compiles `pattern`; errors name the problem and its offset ("regex: unsupported lookahead at
// offset 3"), an NFA over kMaxNfaStates, or a regex that matches nothing.
Result<ByteNfa> compile_regex(std::string_view pattern);

// `text` with every regex metacharacter escaped (a literal).
std::string regex_escape(std::string_view text);

}  // namespace lathe
