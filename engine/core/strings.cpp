#include "engine/core/strings.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>

namespace lathe {

std::string strformat(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  va_list copy;
  va_copy(copy, args);
  const int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  std::string out(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(out.data(), out.size() + 1, fmt, args);
  va_end(args);
  return out;
}

std::string format_bytes(double bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (std::fabs(bytes) >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    ++u;
  }
  if (u == 0) return strformat("%.0f B", bytes);
  return strformat(bytes < 10 ? "%.2f %s" : (bytes < 100 ? "%.1f %s" : "%.0f %s"), bytes,
                   kUnits[u]);
}

std::string format_count(double n) {
  if (n >= 1e9) return strformat("%.2fB", n / 1e9);
  if (n >= 1e6) return strformat("%.0fM", n / 1e6);
  if (n >= 1e3) return strformat("%.0fK", n / 1e3);
  return strformat("%.0f", n);
}

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t pos = s.find(sep, start);
    out.emplace_back(
        s.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return out;
}

std::string_view trim(std::string_view s) {
  const char* ws = " \t\r\n";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  const size_t e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

bool starts_with(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}
bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

int64_t parse_byte_size(std::string_view s) {
  s = trim(s);
  if (s.empty()) return -1;
  std::string str(s);
  char* end = nullptr;
  const double v = std::strtod(str.c_str(), &end);
  if (end == str.c_str() || !(v >= 0) || !std::isfinite(v)) return -1;
  std::string unit(trim(std::string_view(end)));
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  double mult = 1;
  if (unit.empty() || unit == "b")
    mult = 1;
  else if (unit == "k" || unit == "kib" || unit == "kb")
    mult = 1024.0;
  else if (unit == "m" || unit == "mib" || unit == "mb")
    mult = 1024.0 * 1024;
  else if (unit == "g" || unit == "gib" || unit == "gb")
    mult = 1024.0 * 1024 * 1024;
  else if (unit == "t" || unit == "tib" || unit == "tb")
    mult = 1024.0 * 1024 * 1024 * 1024;
  else
    return -1;
  const double bytes = v * mult;
  if (bytes > 9.0e18) return -1;
  return static_cast<int64_t>(bytes);
}

size_t valid_utf8_prefix(std::string_view s) {
  size_t i = 0, last_good = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len;
    uint32_t min_cp;
    if (c < 0x80) {
      len = 1;
      min_cp = 0;
    } else if ((c & 0xe0) == 0xc0) {
      len = 2;
      min_cp = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3;
      min_cp = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4;
      min_cp = 0x10000;
    } else
      return last_good;
    if (i + len > s.size()) return last_good;
    uint32_t cp = len == 1 ? c : (c & (0x7f >> len));
    for (size_t k = 1; k < len; ++k) {
      const unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return last_good;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if (cp < min_cp || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return last_good;
    i += len;
    last_good = i;
  }
  return last_good;
}

bool is_valid_utf8(std::string_view s) {
  return valid_utf8_prefix(s) == s.size();
}

}  // namespace lathe
