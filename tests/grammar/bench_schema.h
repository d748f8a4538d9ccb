// The schema the constrained-decoding benchmarks walk (grammar_bench.cpp, guided_host_bench.cpp):
// a 6-property object with a nested object, an enum array, a bounded integer and number, an email
// and a pattern; the same as benchmarks/schemas/person.json, which the GPU runs send.
#pragma once

namespace lathe::bench {

inline constexpr const char* kPersonSchema = R"({"type": "object", "properties": {
  "name": {"type": "string", "maxLength": 40},
  "age": {"type": "integer", "minimum": 0, "maximum": 150},
  "email": {"type": "string", "format": "email"},
  "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "vip", "new"]}, "maxItems": 4},
  "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string", "pattern": "[0-9]{5}"}}, "required": ["city"]},
  "score": {"type": "number", "minimum": 0, "maximum": 100}},
  "required": ["name", "age", "tags"]})";

}  // namespace lathe::bench
