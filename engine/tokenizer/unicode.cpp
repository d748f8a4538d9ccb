#include "engine/tokenizer/unicode.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>

namespace lathe::unicode {

namespace {

// Valid range of the second byte of a sequence led by `lead` (Unicode Table 3-7), or {0, 0} when
// `lead` cannot start a multi-byte sequence. Sets `len` to the sequence length.
struct ByteRange {
  unsigned char lo, hi;
};
ByteRange second_byte_range(unsigned char lead, size_t* len) {
  if (lead >= 0xC2 && lead <= 0xDF) {
    *len = 2;
    return {0x80, 0xBF};
  }
  if (lead == 0xE0) {
    *len = 3;
    return {0xA0, 0xBF};
  }
  if ((lead >= 0xE1 && lead <= 0xEC) || lead == 0xEE || lead == 0xEF) {
    *len = 3;
    return {0x80, 0xBF};
  }
  if (lead == 0xED) {
    *len = 3;
    return {0x80, 0x9F};
  }
  if (lead == 0xF0) {
    *len = 4;
    return {0x90, 0xBF};
  }
  if (lead >= 0xF1 && lead <= 0xF3) {
    *len = 4;
    return {0x80, 0xBF};
  }
  if (lead == 0xF4) {
    *len = 4;
    return {0x80, 0x8F};
  }
  *len = 0;
  return {0, 0};
}

// Length of the well-formed prefix of the sequence starting at s[pos]: `complete` tells whether it
// is a whole character; otherwise the prefix is a maximal ill-formed subpart (>= 1 byte) and
// `could_continue` tells whether it only ended because the input ended.
struct SeqScan {
  size_t len;
  bool complete;
  bool could_continue;
};
SeqScan scan_sequence(std::string_view s, size_t pos) {
  const auto lead = static_cast<unsigned char>(s[pos]);
  if (lead < 0x80) return {1, true, false};
  size_t need = 0;
  const ByteRange second = second_byte_range(lead, &need);
  if (need == 0) return {1, false, false};
  size_t got = 1;
  while (got < need) {
    if (pos + got >= s.size()) return {got, false, true};
    const auto c = static_cast<unsigned char>(s[pos + got]);
    const bool ok = got == 1 ? (c >= second.lo && c <= second.hi) : (c >= 0x80 && c <= 0xBF);
    if (!ok) return {got, false, false};
    ++got;
  }
  return {need, true, false};
}

const icu::Normalizer2* nfc_instance() {
  static const icu::Normalizer2* instance = [] {
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2* n = icu::Normalizer2::getNFCInstance(status);
    return U_SUCCESS(status) ? n : nullptr;
  }();
  return instance;
}

void append_nfc_valid(std::string_view valid, std::string& out) {
  const icu::Normalizer2* n = nfc_instance();
  if (n == nullptr) {
    out.append(valid);
    return;
  }
  UErrorCode status = U_ZERO_ERROR;
  const icu::StringPiece piece(valid.data(), static_cast<int32_t>(valid.size()));
  if (n->isNormalizedUTF8(piece, status) && U_SUCCESS(status)) {
    out.append(valid);
    return;
  }
  status = U_ZERO_ERROR;
  std::string normalized;
  icu::StringByteSink<std::string> sink(&normalized);
  n->normalizeUTF8(0, piece, sink, nullptr, status);
  out.append(U_SUCCESS(status) ? std::string_view(normalized) : valid);
}

}  // namespace

uint32_t decode_utf8(std::string_view s, size_t pos, size_t* len) {
  const SeqScan scan = scan_sequence(s, pos);
  if (!scan.complete) {
    *len = 1;
    return kInvalidCodepoint;
  }
  *len = scan.len;
  const auto* p = reinterpret_cast<const unsigned char*>(s.data() + pos);
  switch (scan.len) {
    case 1:
      return p[0];
    case 2:
      return ((p[0] & 0x1Fu) << 6) | (p[1] & 0x3Fu);
    case 3:
      return ((p[0] & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
    default:
      return ((p[0] & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) |
             (p[3] & 0x3Fu);
  }
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

CharClass char_class(uint32_t cp) {
  if (cp < 0x80) {
    // ASCII fast path (same answers as ICU).
    if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return kClassLetter;
    if (cp >= '0' && cp <= '9') return kClassNumber;
    if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return kClassSpace;
    return kClassOther;
  }
  if (cp == kInvalidCodepoint) return kClassOther;
  const auto c = static_cast<UChar32>(cp);
  const uint32_t mask = U_GET_GC_MASK(c);
  if (mask & U_GC_L_MASK) return kClassLetter;
  if (mask & U_GC_N_MASK) return kClassNumber;
  if (u_isUWhiteSpace(c)) return kClassSpace;
  return kClassOther;
}

bool is_word_char(uint32_t cp) {
  if (cp == kInvalidCodepoint) return false;
  const auto c = static_cast<UChar32>(cp);
  const uint32_t mask = U_GET_GC_MASK(c);
  return u_hasBinaryProperty(c, UCHAR_ALPHABETIC) ||
         (mask & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) ||
         u_hasBinaryProperty(c, UCHAR_JOIN_CONTROL);
}

std::string nfc(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t start = 0, pos = 0;
  while (pos < s.size()) {
    const SeqScan scan = scan_sequence(s, pos);
    if (scan.complete) {
      pos += scan.len;
      continue;
    }
    append_nfc_valid(s.substr(start, pos - start), out);
    out.append(s.substr(pos, scan.len));
    pos += scan.len;
    start = pos;
  }
  append_nfc_valid(s.substr(start), out);
  return out;
}

size_t append_sanitized_utf8(std::string_view in, std::string& out, bool final) {
  size_t pos = 0;
  while (pos < in.size()) {
    const SeqScan scan = scan_sequence(in, pos);
    if (scan.complete) {
      out.append(in.substr(pos, scan.len));
    } else {
      if (scan.could_continue && !final) break;  // wait for the rest of the character
      out.append("\xEF\xBF\xBD");
    }
    pos += scan.len;
  }
  return pos;
}

std::string sanitize_utf8(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  append_sanitized_utf8(in, out, true);
  return out;
}

}  // namespace lathe::unicode
