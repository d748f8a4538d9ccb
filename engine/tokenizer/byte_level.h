// GPT-2's byte <-> unicode alphabet. Byte-level BPE vocabularies spell every byte as one printable
// character: bytes that are printable Latin-1 map to themselves, the other 68 to U+0100.. in order
// (so a space is "Ġ" U+0120 and a newline "Ċ" U+010A).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace lathe::byte_level {

// The character (code point) that spells `byte`.
uint32_t byte_to_codepoint(uint8_t byte);
// The byte a character spells, or -1 when `cp` is not in the alphabet.
int codepoint_to_byte(uint32_t cp);

// UTF-8 of the alphabet characters spelling `bytes` (what a vocabulary entry looks like).
std::string encode(std::string_view bytes);
// The bytes a vocabulary entry spells. Characters outside the alphabet (vocabulary entries that
// were stored as plain text) contribute their own UTF-8 bytes.
std::string decode(std::string_view token_text);

}  // namespace lathe::byte_level
