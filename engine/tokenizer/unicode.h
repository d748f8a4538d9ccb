// Unicode helpers for the tokenizers: UTF-8 decoding that never fails, the character classes the
// pre-tokenizer regexes use (\p{L}, \p{N}, \s), NFC normalization and U+FFFD replacement of
// invalid UTF-8. Character properties come from ICU.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace lathe::unicode {

// Marks a byte that does not start a valid UTF-8 sequence; decode_utf8 returns it with length 1.
inline constexpr uint32_t kInvalidCodepoint = 0xFFFFFFFFu;

// Decodes the UTF-8 character at s[pos] (pos < s.size()). Sets `len` to its byte length. A byte
// that does not start a complete, valid, shortest-form sequence yields kInvalidCodepoint, len 1.
uint32_t decode_utf8(std::string_view s, size_t pos, size_t* len);

// Appends the UTF-8 encoding of `cp` (cp <= 0x10FFFF).
void append_utf8(std::string& out, uint32_t cp);

// Character classes as the tokenizer regexes mean them (Oniguruma/Rust semantics):
// letter = general category L*, number = N* (Nd, Nl, No), space = Unicode White_Space.
// kInvalidCodepoint is none of them.
enum CharClass : uint8_t {
  kClassOther = 0,
  kClassLetter = 1,
  kClassNumber = 2,
  kClassSpace = 3,
};
CharClass char_class(uint32_t cp);

// \w of Rust's regex crate (Alphabetic, marks, decimal digits, connector punctuation, join
// controls).
bool is_word_char(uint32_t cp);

// NFC normalization of valid UTF-8. Invalid bytes are kept as they are (the segments between them
// are normalized on their own), so this never loses input.
std::string nfc(std::string_view s);

// Replaces invalid UTF-8 with U+FFFD, one per maximal ill-formed subpart (the Unicode "best
// practice" that Python's errors="replace" and Rust's from_utf8_lossy follow).
//
// Streaming form: appends the sanitized text of a prefix of `in` to `out` and returns how many
// bytes of `in` it consumed. With final == false a trailing incomplete sequence that could still
// become valid is left unconsumed (at most 3 bytes); with final == true everything is consumed.
size_t append_sanitized_utf8(std::string_view in, std::string& out, bool final);
std::string sanitize_utf8(std::string_view in);

}  // namespace lathe::unicode
