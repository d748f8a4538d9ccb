// Small string helpers shared across the engine.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lathe {

// printf-style formatting into a std::string.
std::string strformat(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// "1.5 GiB", "640 MiB", "12 KiB", "100 B" (binary units).
std::string format_bytes(double bytes);
// "135M", "8.03B" parameter counts.
std::string format_count(double n);

std::vector<std::string> split(std::string_view s, char sep);
std::string_view trim(std::string_view s);
bool starts_with(std::string_view s, std::string_view prefix);
bool ends_with(std::string_view s, std::string_view suffix);
// ASCII case-insensitive equality (header names, tokens such as "keep-alive").
bool iequals(std::string_view a, std::string_view b);

// Parses sizes such as "512MiB", "2GiB", "1.5G", "4096" (bytes). -1 on a malformed string.
int64_t parse_byte_size(std::string_view s);

// Length of the longest prefix of `s` that is complete, valid UTF-8.
size_t valid_utf8_prefix(std::string_view s);
bool is_valid_utf8(std::string_view s);

}  // namespace lathe
