#include "engine/core/dtype.h"

#include <array>

namespace lathe {
namespace {

constexpr std::array<DTypeInfo, 18> kInfos = {{
    {"f32", 1, 4, false, true},
    {"f16", 1, 2, false, true},
    {"bf16", 1, 2, false, true},
    {"f8_e4m3", 1, 1, false, true},
    {"i8", 1, 1, false, false},
    {"i32", 1, 4, false, false},
    {"i64", 1, 8, false, false},
    {"u8", 1, 1, false, false},
    {"q8_0", 32, 34, true, false},
    {"q4_0", 32, 18, true, false},
    {"q4_1", 32, 20, true, false},
    {"q5_0", 32, 22, true, false},
    {"q5_1", 32, 24, true, false},
    {"q4_k", 256, 144, true, false},
    {"q5_k", 256, 176, true, false},
    {"q6_k", 256, 210, true, false},
    {"q2_k", 256, 84, true, false},
    {"q3_k", 256, 110, true, false},
}};

struct GgmlId {
  uint32_t id;
  DType type;
};
constexpr std::array<GgmlId, 14> kGgml = {{
    {0, DType::kF32},
    {1, DType::kF16},
    {2, DType::kQ4_0},
    {3, DType::kQ4_1},
    {6, DType::kQ5_0},
    {7, DType::kQ5_1},
    {8, DType::kQ8_0},
    {10, DType::kQ2_K},
    {11, DType::kQ3_K},
    {12, DType::kQ4_K},
    {13, DType::kQ5_K},
    {14, DType::kQ6_K},
    {24, DType::kI8},
    {30, DType::kBF16},
}};

}  // namespace

const DTypeInfo& dtype_info(DType t) {
  return kInfos[static_cast<size_t>(t)];
}

std::optional<int64_t> dtype_bytes(DType t, int64_t num_elements) {
  const DTypeInfo& info = dtype_info(t);
  if (num_elements < 0 || num_elements % info.block_size != 0) return std::nullopt;
  return num_elements / info.block_size * info.block_bytes;
}

double dtype_bits_per_element(DType t) {
  const DTypeInfo& info = dtype_info(t);
  return 8.0 * static_cast<double>(info.block_bytes) / static_cast<double>(info.block_size);
}

std::optional<DType> dtype_from_ggml(uint32_t ggml_type) {
  for (const GgmlId& g : kGgml)
    if (g.id == ggml_type) return g.type;
  return std::nullopt;
}

std::optional<uint32_t> ggml_type_id(DType type) {
  for (const GgmlId& g : kGgml)
    if (g.type == type) return g.id;
  return std::nullopt;
}

std::string_view ggml_type_name(uint32_t id) {
  static constexpr std::array<std::string_view, 40> kNames = {
      "f32",   "f16",        "q4_0",       "q4_1",       "q4_2",     "q4_3",     "q5_0",
      "q5_1",  "q8_0",       "q8_1",       "q2_K",       "q3_K",     "q4_K",     "q5_K",
      "q6_K",  "q8_K",       "iq2_xxs",    "iq2_xs",     "iq3_xxs",  "iq1_s",    "iq4_nl",
      "iq3_s", "iq2_s",      "iq4_xs",     "i8",         "i16",      "i32",      "i64",
      "f64",   "iq1_m",      "bf16",       "q4_0_4_4",   "q4_0_4_8", "q4_0_8_8", "tq1_0",
      "tq2_0", "iq4_nl_4_4", "iq4_nl_4_8", "iq4_nl_8_8", "mxfp4"};
  return id < kNames.size() ? kNames[id] : std::string_view("unknown");
}

std::optional<DType> dtype_from_safetensors(std::string_view s) {
  if (s == "F32") return DType::kF32;
  if (s == "F16") return DType::kF16;
  if (s == "BF16") return DType::kBF16;
  if (s == "F8_E4M3") return DType::kF8E4M3;
  if (s == "I8") return DType::kI8;
  if (s == "I32") return DType::kI32;
  if (s == "I64") return DType::kI64;
  if (s == "U8") return DType::kU8;
  return std::nullopt;
}

std::optional<DType> parse_float_dtype(std::string_view s) {
  if (s == "f32" || s == "float32" || s == "float") return DType::kF32;
  if (s == "f16" || s == "float16" || s == "half" || s == "fp16") return DType::kF16;
  if (s == "bf16" || s == "bfloat16") return DType::kBF16;
  return std::nullopt;
}

}  // namespace lathe
