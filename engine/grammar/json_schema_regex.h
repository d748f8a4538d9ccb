// JSON schemas as regular expressions (byte_regex.h's dialect), Outlines' approach: output that
// matches the regex is compact JSON (one optional space after ':' and ',') that parses and
// validates against the schema.
//
// Supported: type (one or a list), enum, const, anyOf / oneOf (as alternatives), allOf of one
// schema, $ref into #/$defs or #/definitions (not recursive); objects: properties (emitted in the
// schema's order), required, additionalProperties (a schema, or true/absent for a free object
// when no properties are listed; listed properties only otherwise); arrays: items, prefixItems,
// minItems, maxItems; strings: minLength, maxLength, pattern (the whole string must match), format
// date, time, date-time, uuid, email, ipv4; integers: minimum, maximum, exclusiveMinimum,
// exclusiveMaximum; numbers: minimum and maximum with integer values; boolean, null; an empty
// schema (any JSON value). Annotations (title, description, default, examples, ...) are ignored.
// Anything else that constrains values (multipleOf, uniqueItems, not, if/then/else,
// patternProperties, minProperties, ...) is refused by name, so that no output can violate it.
// Unbounded values are bounded where a regex must be: integers at 15 digits, JSON nesting of a
// free value at kMaxFreeDepth.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <vector>

#include "engine/core/status.h"

namespace lathe {

inline constexpr int kMaxFreeDepth = 4;

// The regex of values valid under `schema`. Errors start with the JSON pointer of the offending
// part ("schema at /properties/age: unsupported keyword multipleOf").
Result<std::string> json_schema_to_regex(const nlohmann::ordered_json& schema);

// Any JSON object (response_format json_object).
std::string json_object_regex();

// One of `choices`, literally (vLLM's guided_choice).
std::string choice_regex(const std::vector<std::string>& choices);

// Integers in [lo, hi] without leading zeros (for tests).
std::string integer_range_regex(long long lo, long long hi);

}  // namespace lathe
