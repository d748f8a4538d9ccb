#include "engine/grammar/byte_regex.h"

#include <algorithm>
#include <array>
#include <bitset>
#include <cctype>
#include <memory>

#include "engine/core/strings.h"

namespace lathe {
namespace {

constexpr int kMaxRepeat = 10000;
constexpr int kMaxGroupDepth = 256;  // parsing and emitting recurse per group

// The regex as a tree; each node is emitted into the NFA (repetition emits its operand again).
struct Node {
  enum Kind { kEmpty, kBytes, kConcat, kAlt, kRepeat } kind = kEmpty;
  std::bitset<256> bytes;  // kBytes: one byte from this set
  std::vector<std::unique_ptr<Node>> kids;
  int min = 0, max = 0;  // kRepeat: max -1 = unbounded
};
using NodePtr = std::unique_ptr<Node>;

NodePtr make(Node::Kind k) {
  auto n = std::make_unique<Node>();
  n->kind = k;
  return n;
}
NodePtr byte_set(const std::bitset<256>& b) {
  NodePtr n = make(Node::kBytes);
  n->bytes = b;
  return n;
}
std::bitset<256> range(int lo, int hi) {
  std::bitset<256> b;
  for (int i = lo; i <= hi; ++i) b.set(static_cast<size_t>(i));
  return b;
}
NodePtr seq(std::vector<NodePtr> parts) {
  NodePtr n = make(Node::kConcat);
  n->kids = std::move(parts);
  return n;
}
NodePtr literal(std::string_view s) {
  std::vector<NodePtr> parts;
  for (unsigned char c : s) parts.push_back(byte_set(range(c, c)));
  return seq(std::move(parts));
}
// Any well-formed multi-byte UTF-8 character (no overlong forms, no surrogates, at most
// U+10FFFF), as the Unicode standard's table of well-formed byte sequences lists them.
NodePtr utf8_multibyte() {
  struct Row {
    int lead_lo, lead_hi, second_lo, second_hi, rest;  // rest: continuation bytes after the second
  };
  static const Row rows[] = {{0xC2, 0xDF, 0x80, 0xBF, 0}, {0xE0, 0xE0, 0xA0, 0xBF, 1},
                             {0xE1, 0xEC, 0x80, 0xBF, 1}, {0xED, 0xED, 0x80, 0x9F, 1},
                             {0xEE, 0xEF, 0x80, 0xBF, 1}, {0xF0, 0xF0, 0x90, 0xBF, 2},
                             {0xF1, 0xF3, 0x80, 0xBF, 2}, {0xF4, 0xF4, 0x80, 0x8F, 2}};
  NodePtr alt = make(Node::kAlt);
  for (const Row& r : rows) {
    std::vector<NodePtr> parts;
    parts.push_back(byte_set(range(r.lead_lo, r.lead_hi)));
    parts.push_back(byte_set(range(r.second_lo, r.second_hi)));
    for (int i = 0; i < r.rest; ++i) parts.push_back(byte_set(range(0x80, 0xBF)));
    alt->kids.push_back(seq(std::move(parts)));
  }
  return alt;
}
// An ASCII set, plus (when `non_ascii`) every multi-byte character.
NodePtr char_class(const std::bitset<256>& ascii, bool non_ascii) {
  if (!non_ascii) return byte_set(ascii);
  NodePtr alt = make(Node::kAlt);
  alt->kids.push_back(byte_set(ascii));
  alt->kids.push_back(utf8_multibyte());
  return alt;
}
std::string utf8_encode(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// Removes the bytes a JSON string cannot hold raw (quote, backslash, control characters).
void drop_json_unsafe(Node& n) {
  if (n.kind == Node::kBytes) {
    n.bytes.reset('"');
    n.bytes.reset('\\');
    for (int i = 0; i < 0x20; ++i) n.bytes.reset(static_cast<size_t>(i));
  }
  for (NodePtr& k : n.kids) drop_json_unsafe(*k);
}

class Parser {
 public:
  explicit Parser(std::string_view p) : p_(p) {}

  Result<NodePtr> parse() {
    if (!p_.empty() && p_[0] == '^') pos_ = 1;
    size_t end = p_.size();
    if (end > pos_ && p_[end - 1] == '$' && (end < 2 || p_[end - 2] != '\\'))
      p_ = p_.substr(0, end - 1);
    NodePtr n = alternation();
    if (!error_.empty()) return invalid_argument(error_);
    if (pos_ < p_.size()) return invalid_argument(fail("unbalanced ')'"));
    return n;
  }

 private:
  std::string fail(const std::string& what) {
    if (error_.empty()) error_ = strformat("regex: %s at offset %zu", what.c_str(), pos_);
    return error_;
  }
  bool at_end() const { return pos_ >= p_.size(); }
  char peek() const { return p_[pos_]; }

  NodePtr alternation() {
    NodePtr first = concatenation();
    if (at_end() || peek() != '|') return first;
    NodePtr alt = make(Node::kAlt);
    alt->kids.push_back(std::move(first));
    while (!at_end() && peek() == '|' && error_.empty()) {
      ++pos_;
      alt->kids.push_back(concatenation());
    }
    return alt;
  }

  NodePtr concatenation() {
    std::vector<NodePtr> parts;
    while (!at_end() && peek() != '|' && peek() != ')' && error_.empty()) {
      NodePtr a = atom();
      if (!error_.empty()) break;
      parts.push_back(quantified(std::move(a)));
    }
    return seq(std::move(parts));
  }

  // Reads "{m}", "{m,}", "{m,n}" after '{'; false when it is not a quantifier.
  bool braces(int* lo, int* hi) {
    size_t i = pos_ + 1;
    auto number = [&](int* out) {
      const size_t s = i;
      long v = 0;
      while (i < p_.size() && p_[i] >= '0' && p_[i] <= '9')
        v = std::min<long>(v * 10 + (p_[i++] - '0'), kMaxRepeat + 1);
      *out = static_cast<int>(v);
      return i > s;
    };
    if (!number(lo)) return false;
    *hi = *lo;
    if (i < p_.size() && p_[i] == ',') {
      ++i;
      if (!number(hi)) *hi = -1;
    }
    if (i >= p_.size() || p_[i] != '}') return false;
    pos_ = i + 1;
    return true;
  }

  NodePtr quantified(NodePtr a) {
    while (!at_end() && error_.empty()) {
      int lo = 0, hi = 0;
      const char c = peek();
      if (c == '*') {
        lo = 0, hi = -1, ++pos_;
      } else if (c == '+') {
        lo = 1, hi = -1, ++pos_;
      } else if (c == '?') {
        lo = 0, hi = 1, ++pos_;
      } else if (c == '{' && braces(&lo, &hi)) {
        if (lo > kMaxRepeat || hi > kMaxRepeat) {
          fail(strformat("repetition count above %d", kMaxRepeat));
          return a;
        }
        if (hi >= 0 && hi < lo) {
          fail(strformat("repetition {%d,%d} has max below min", lo, hi));
          return a;
        }
      } else {
        break;
      }
      if (!at_end() && peek() == '?') ++pos_;  // lazy: same language
      if (!at_end() && peek() == '+') {
        fail("possessive quantifiers are not supported");
        return a;
      }
      NodePtr r = make(Node::kRepeat);
      r->min = lo;
      r->max = hi;
      r->kids.push_back(std::move(a));
      a = std::move(r);
    }
    return a;
  }

  // Reads one escape after '\' into a set (for classes) or a literal; returns false on error.
  // Multi-byte results (\uHHHH above 0x7F) come back in *text.
  bool escape(std::bitset<256>* set, std::string* text, bool* non_ascii_class) {
    if (at_end()) {
      fail("trailing backslash");
      return false;
    }
    const char c = p_[pos_++];
    *non_ascii_class = false;
    auto hex = [&](int digits, uint32_t* out) {
      uint32_t v = 0;
      for (int k = 0; k < digits; ++k) {
        if (at_end() || !std::isxdigit(static_cast<unsigned char>(peek()))) return false;
        const char h = p_[pos_++];
        v = v * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h))
                                               ? h - '0'
                                               : std::tolower(h) - 'a' + 10);
      }
      *out = v;
      return true;
    };
    const std::bitset<256> digit = range('0', '9');
    std::bitset<256> word = range('a', 'z') | range('A', 'Z') | digit;
    word.set('_');
    std::bitset<256> space;
    for (char s : {' ', '\t', '\n', '\r', '\f', '\v'}) space.set(static_cast<unsigned char>(s));
    const std::bitset<256> ascii = range(0, 0x7F);
    switch (c) {
      case 'd':
        *set = digit;
        return true;
      case 'w':
        *set = word;
        return true;
      case 's':
        *set = space;
        return true;
      case 'D':
        *set = ascii & ~digit;
        *non_ascii_class = true;
        return true;
      case 'W':
        *set = ascii & ~word;
        *non_ascii_class = true;
        return true;
      case 'S':
        *set = ascii & ~space;
        *non_ascii_class = true;
        return true;
      case 'n':
        *set = range('\n', '\n');
        return true;
      case 'r':
        *set = range('\r', '\r');
        return true;
      case 't':
        *set = range('\t', '\t');
        return true;
      case 'f':
        *set = range('\f', '\f');
        return true;
      case 'v':
        *set = range('\v', '\v');
        return true;
      case '0':
        *set = range(0, 0);
        return true;
      case 'x':
      case 'u': {
        uint32_t v = 0;
        if (!hex(c == 'x' ? 2 : 4, &v)) {
          fail(std::string("\\") + c + " needs hex digits");
          return false;
        }
        if (v < 0x80) {
          *set = range(static_cast<int>(v), static_cast<int>(v));
        } else if (c == 'x' && v < 0x100) {
          *text = utf8_encode(v);  // \xHH means the character U+00HH
        } else {
          *text = utf8_encode(v);
        }
        return true;
      }
      case 'b':
      case 'B':
      case 'A':
      case 'Z':
      case 'z':
      case 'G':
        fail(std::string("anchor \\") + c + " is not supported");
        return false;
      default:
        if (c >= '1' && c <= '9') {
          fail("backreferences are not supported");
          return false;
        }
        if (std::isalnum(static_cast<unsigned char>(c))) {
          fail(std::string("unknown escape \\") + c);
          return false;
        }
        *set = range(static_cast<unsigned char>(c), static_cast<unsigned char>(c));
        return true;
    }
  }

  // One UTF-8 character of the pattern as text.
  std::string utf8_char() {
    const unsigned char c = static_cast<unsigned char>(p_[pos_]);
    size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    len = std::min(len, p_.size() - pos_);
    std::string s(p_.substr(pos_, len));
    pos_ += len;
    return s;
  }

  NodePtr bracket() {
    ++pos_;  // '['
    bool negate = false;
    if (!at_end() && peek() == '^') negate = true, ++pos_;
    std::bitset<256> set;
    bool any_non_ascii = false;  // from \D \W \S
    std::vector<std::string> multibyte;
    bool first = true;
    while (!at_end() && (peek() != ']' || first) && error_.empty()) {
      first = false;
      std::bitset<256> item;
      std::string text;
      bool nac = false;
      int lo_char = -1;
      if (peek() == '\\') {
        ++pos_;
        if (!escape(&item, &text, &nac)) return nullptr;
        if (item.count() == 1 && text.empty())
          for (int i = 0; i < 256; ++i)
            if (item.test(static_cast<size_t>(i))) lo_char = i;
      } else if (static_cast<unsigned char>(peek()) >= 0x80) {
        text = utf8_char();
      } else {
        lo_char = static_cast<unsigned char>(p_[pos_++]);
        item.set(static_cast<size_t>(lo_char));
      }
      if (lo_char >= 0 && pos_ + 1 < p_.size() && peek() == '-' && p_[pos_ + 1] != ']') {
        ++pos_;
        int hi_char = -1;
        if (peek() == '\\') {
          ++pos_;
          std::bitset<256> h;
          std::string htext;
          bool hn = false;
          if (!escape(&h, &htext, &hn)) return nullptr;
          if (h.count() == 1 && htext.empty())
            for (int i = 0; i < 256; ++i)
              if (h.test(static_cast<size_t>(i))) hi_char = i;
        } else if (static_cast<unsigned char>(peek()) < 0x80) {
          hi_char = static_cast<unsigned char>(p_[pos_++]);
        }
        if (hi_char < 0) {
          fail("class ranges must be between ASCII characters");
          return nullptr;
        }
        if (hi_char < lo_char) {
          fail("class range out of order");
          return nullptr;
        }
        item = range(lo_char, hi_char);
      }
      set |= item;
      any_non_ascii |= nac;
      if (!text.empty()) multibyte.push_back(text);
    }
    if (at_end()) {
      fail("unterminated character class");
      return nullptr;
    }
    ++pos_;  // ']'
    if (negate) {
      if (!multibyte.empty() || any_non_ascii) {
        fail("non-ASCII members in a negated class are not supported");
        return nullptr;
      }
      return char_class(range(0, 0x7F) & ~set, true);
    }
    NodePtr n = char_class(set, any_non_ascii);
    if (multibyte.empty()) return n;
    NodePtr alt = make(Node::kAlt);
    alt->kids.push_back(std::move(n));
    for (const std::string& m : multibyte) alt->kids.push_back(literal(m));
    return alt;
  }

  NodePtr atom() {
    const char c = peek();
    if (c == '(') {
      if (++depth_ > kMaxGroupDepth) {
        fail(strformat("groups nest deeper than %d", kMaxGroupDepth));
        return nullptr;
      }
      ++pos_;
      bool json_safe = false;
      if (!at_end() && peek() == '?') {
        if (pos_ + 1 < p_.size() && p_[pos_ + 1] == ':') {
          pos_ += 2;
        } else if (p_.substr(pos_, 3) == "?J:") {
          pos_ += 3;
          json_safe = true;
        } else {
          fail("lookaround, named groups and inline flags are not supported");
          return nullptr;
        }
      }
      NodePtr n = alternation();
      if (at_end() || peek() != ')') {
        fail("missing ')'");
        return nullptr;
      }
      ++pos_;
      --depth_;
      if (json_safe && n) drop_json_unsafe(*n);
      return n;
    }
    if (c == '[') return bracket();
    if (c == '.') {
      ++pos_;
      std::bitset<256> b = range(0, 0x7F);
      b.reset('\n');
      return char_class(b, true);
    }
    if (c == '*' || c == '+' || c == '?' || c == '{') {
      // A '{' that is not a quantifier is a literal, as in Python.
      int lo, hi;
      const size_t save = pos_;
      if (c == '{' && !braces(&lo, &hi)) {
        ++pos_;
        return literal("{");
      }
      pos_ = save;
      fail(std::string("nothing to repeat before '") + c + "'");
      return nullptr;
    }
    if (c == '^' || c == '$') {
      fail(std::string("anchor '") + c + "' inside the pattern is not supported");
      return nullptr;
    }
    if (c == '\\') {
      ++pos_;
      std::bitset<256> set;
      std::string text;
      bool nac = false;
      if (!escape(&set, &text, &nac)) return nullptr;
      if (!text.empty()) return literal(text);
      return char_class(set, nac);
    }
    return literal(utf8_char());
  }

  std::string_view p_;
  size_t pos_ = 0;
  int depth_ = 0;  // open groups
  std::string error_;
};

class Builder {
 public:
  explicit Builder(ByteNfa& nfa) : nfa_(nfa) {}

  int32_t add() {
    if (static_cast<int64_t>(nfa_.states.size()) >= kMaxNfaStates) {
      too_big_ = true;
      return 0;
    }
    nfa_.states.emplace_back();
    return static_cast<int32_t>(nfa_.states.size() - 1);
  }
  bool too_big() const { return too_big_; }

  // Emits `n` between fresh states; returns {in, out}.
  std::pair<int32_t, int32_t> emit(const Node& n) {
    const int32_t in = add(), out = add();
    if (too_big_) return {0, 0};
    switch (n.kind) {
      case Node::kEmpty:
        nfa_.states[in].eps.push_back(out);
        break;
      case Node::kBytes: {
        int i = 0;
        while (i < 256) {
          if (!n.bytes.test(static_cast<size_t>(i))) {
            ++i;
            continue;
          }
          int j = i;
          while (j + 1 < 256 && n.bytes.test(static_cast<size_t>(j + 1))) ++j;
          nfa_.states[in].edges.push_back({static_cast<uint8_t>(i), static_cast<uint8_t>(j), out});
          i = j + 1;
        }
        break;
      }
      case Node::kConcat: {
        int32_t cur = in;
        for (const NodePtr& k : n.kids) {
          auto [a, b] = emit(*k);
          if (too_big_) return {0, 0};
          nfa_.states[cur].eps.push_back(a);
          cur = b;
        }
        nfa_.states[cur].eps.push_back(out);
        break;
      }
      case Node::kAlt:
        for (const NodePtr& k : n.kids) {
          auto [a, b] = emit(*k);
          if (too_big_) return {0, 0};
          nfa_.states[in].eps.push_back(a);
          nfa_.states[b].eps.push_back(out);
        }
        break;
      case Node::kRepeat: {
        const Node& k = *n.kids[0];
        int32_t cur = in;
        for (int i = 0; i < n.min; ++i) {
          auto [a, b] = emit(k);
          if (too_big_) return {0, 0};
          nfa_.states[cur].eps.push_back(a);
          cur = b;
        }
        if (n.max < 0) {
          auto [a, b] = emit(k);
          if (too_big_) return {0, 0};
          nfa_.states[cur].eps.push_back(a);
          nfa_.states[b].eps.push_back(a);
          nfa_.states[b].eps.push_back(out);
        } else {
          for (int i = n.min; i < n.max; ++i) {
            auto [a, b] = emit(k);
            if (too_big_) return {0, 0};
            nfa_.states[cur].eps.push_back(a);
            nfa_.states[cur].eps.push_back(out);
            cur = b;
          }
        }
        nfa_.states[cur].eps.push_back(out);
        break;
      }
    }
    return {in, out};
  }

 private:
  ByteNfa& nfa_;
  bool too_big_ = false;
};

// Marks the states that can reach `accept` (reverse search).
void mark_live(ByteNfa& nfa) {
  const size_t n = nfa.states.size();
  std::vector<std::vector<int32_t>> rev(n);
  for (size_t s = 0; s < n; ++s) {
    for (const ByteNfa::Edge& e : nfa.states[s].edges)
      rev[static_cast<size_t>(e.to)].push_back(static_cast<int32_t>(s));
    for (int32_t t : nfa.states[s].eps)
      rev[static_cast<size_t>(t)].push_back(static_cast<int32_t>(s));
  }
  nfa.live.assign(n, 0);
  std::vector<int32_t> stack = {nfa.accept};
  nfa.live[static_cast<size_t>(nfa.accept)] = 1;
  while (!stack.empty()) {
    const int32_t s = stack.back();
    stack.pop_back();
    for (int32_t p : rev[static_cast<size_t>(s)])
      if (!nfa.live[static_cast<size_t>(p)]) {
        nfa.live[static_cast<size_t>(p)] = 1;
        stack.push_back(p);
      }
  }
}

}  // namespace

Result<ByteNfa> compile_regex(std::string_view pattern) {
  Parser parser(pattern);
  LATHE_ASSIGN_OR_RETURN(NodePtr root, parser.parse());
  ByteNfa nfa;
  Builder b(nfa);
  auto [in, out] = b.emit(*root);
  if (b.too_big())
    return invalid_argument(
        strformat("regex: compiles to more than %d automaton states; use fewer or smaller bounded "
                  "repetitions",
                  kMaxNfaStates));
  nfa.start = in;
  nfa.accept = out;
  mark_live(nfa);
  if (!nfa.live[static_cast<size_t>(nfa.start)])
    return invalid_argument("regex: the pattern cannot match any string");
  return nfa;
}

std::string regex_escape(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (std::string_view("\\^$.|?*+()[]{}/-").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

}  // namespace lathe
