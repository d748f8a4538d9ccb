// Internal to the filter files: the registry of filter functions, which filters.cpp builds and
// text_filters.cpp fills with the string and number filters.
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>

#include "engine/tokenizer/jinja/value.h"

namespace lathe::jinja {

using FilterFn = Value (*)(Interpreter&, const Value& input, CallArgs& args);
using FilterTable = std::unordered_map<std::string_view, FilterFn>;

void add_text_filters(FilterTable& table);

// Filters that return soft_str(value).method() keep a Markup input's Markup-ness.
Value like(const Value& input, std::string s);

}  // namespace lathe::jinja
