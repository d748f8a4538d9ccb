// Python str semantics over UTF-8 strings: code point indexing, whitespace, case mapping (ICU,
// full Unicode mappings like Python's), strip/split/replace/splitlines as Python defines them.
// Invalid UTF-8 bytes count as one code point each, so no input can make these functions fail.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lathe::jinja {

// Byte offsets of each code point, plus s.size() at the end (so a string of n code points gives
// n + 1 offsets).
std::vector<size_t> code_point_offsets(std::string_view s);
size_t code_point_count(std::string_view s);
bool is_ascii(std::string_view s);
// Decodes the code point at byte offset i and advances i past it.
char32_t next_code_point(std::string_view s, size_t& i);

bool is_space(char32_t c);  // Python str.isspace() for one code point
bool is_alnum(char32_t c);  // letters and digits, as Python's \w without "_"

std::string to_upper(std::string_view s);
std::string to_lower(std::string_view s);
std::string capitalize(std::string_view s);  // str.capitalize(): first upper, rest lower
std::string py_title(std::string_view s);    // str.title()
std::string jinja_title(
    std::string_view s);  // Jinja's |title (words split on spaces, -, (, {, [, <)

// str.strip / lstrip / rstrip; `chars` absent means whitespace.
std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right);
// str.split(sep, maxsplit): sep absent splits on runs of whitespace and drops empty parts.
// maxsplit < 0 means no limit. from_right gives str.rsplit. An empty sep is an error (returns
// nullopt).
std::optional<std::vector<std::string>> split(std::string_view s,
                                              const std::optional<std::string>& sep,
                                              int64_t maxsplit, bool from_right);
std::vector<std::string> splitlines(std::string_view s, bool keepends);
// str.replace(old, new, count); count < 0 replaces all.
std::string replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count);
int64_t count_occurrences(std::string_view s, std::string_view sub);
// markupsafe.escape: & < > " ' become entities.
std::string html_escape(std::string_view s);
bool is_lower(std::string_view s);  // str.islower(): has cased characters, all lower
bool is_upper(std::string_view s);

}  // namespace lathe::jinja
