#include "engine/tokenizer/byte_level.h"

#include <array>

#include "engine/tokenizer/unicode.h"

namespace lathe::byte_level {

namespace {

struct Tables {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 324> to_byte{};  // index: code point (all alphabet code points are < 324)
};

const Tables& tables() {
  static const Tables t = [] {
    Tables t;
    t.to_byte.fill(-1);
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      t.to_cp[b] = printable ? b : next++;
      t.to_byte[t.to_cp[b]] = static_cast<int16_t>(b);
    }
    return t;
  }();
  return t;
}

}  // namespace

uint32_t byte_to_codepoint(uint8_t byte) {
  return tables().to_cp[byte];
}

int codepoint_to_byte(uint32_t cp) {
  const Tables& t = tables();
  return cp < t.to_byte.size() ? t.to_byte[cp] : -1;
}

std::string encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) unicode::append_utf8(out, byte_to_codepoint(static_cast<uint8_t>(c)));
  return out;
}

std::string decode(std::string_view token_text) {
  std::string out;
  out.reserve(token_text.size());
  size_t pos = 0;
  while (pos < token_text.size()) {
    size_t len = 0;
    const uint32_t cp = unicode::decode_utf8(token_text, pos, &len);
    const int b = cp == unicode::kInvalidCodepoint ? -1 : codepoint_to_byte(cp);
    if (b >= 0) {
      out.push_back(static_cast<char>(b));
    } else {
      out.append(token_text.substr(pos, len));
    }
    pos += len;
  }
  return out;
}

}  // namespace lathe::byte_level
