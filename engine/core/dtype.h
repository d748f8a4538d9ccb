// Element types of tensors Lathe reads, stores and computes with, including GGUF block-quantized
// types. A quantized type packs `block_size` weights into `block_bytes` bytes; plain types have
// block_size 1.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace lathe {

enum class DType : uint8_t {
  kF32,
  kF16,
  kBF16,
  kF8E4M3,
  kI8,
  kI32,
  kI64,
  kU8,
  kQ8_0,  // 32 weights in 34 bytes
  kQ4_0,  // 32 weights in 18 bytes
  kQ4_1,  // 32 weights in 20 bytes
  kQ5_0,  // 32 weights in 22 bytes
  kQ5_1,  // 32 weights in 24 bytes
  kQ4_K,  // 256 weights in 144 bytes
  kQ5_K,  // 256 weights in 176 bytes
  kQ6_K,  // 256 weights in 210 bytes
  kQ2_K,  // 256 weights in 84 bytes
  kQ3_K,  // 256 weights in 110 bytes
};

struct DTypeInfo {
  std::string_view name;  // "f32", "bf16", "q4_k", ...
  int64_t block_size;     // elements per block (1 for plain types)
  int64_t block_bytes;    // bytes per block
  bool is_quantized;      // a GGUF block type that must be dequantized to compute
  bool is_float;          // f32 / f16 / bf16 / f8: usable as activations
};

const DTypeInfo& dtype_info(DType t);
inline std::string_view dtype_name(DType t) {
  return dtype_info(t).name;
}
inline bool is_quantized(DType t) {
  return dtype_info(t).is_quantized;
}

// Bytes of `num_elements` elements; nullopt when num_elements is not a multiple of the block size.
std::optional<int64_t> dtype_bytes(DType t, int64_t num_elements);

// Average bits per weight, for memory estimates (q4_1: 5.0, bf16: 16).
double dtype_bits_per_element(DType t);

// ggml type ids (GGUF tensor infos) -> DType. nullopt for types Lathe does not support.
std::optional<DType> dtype_from_ggml(uint32_t ggml_type);
// DType -> ggml type id (the inverse of dtype_from_ggml); nullopt for types GGUF has no id for here
// (f8_e4m3, i32, i64, u8).
std::optional<uint32_t> ggml_type_id(DType type);
// The name ggml uses for an id, also for unsupported ones ("q2_K", "iq4_xs"), for error messages.
std::string_view ggml_type_name(uint32_t ggml_type);

// safetensors dtype strings ("F16", "BF16", "F8_E4M3", ...) -> DType.
std::optional<DType> dtype_from_safetensors(std::string_view s);

// Parses user-facing names: "f32", "float32", "f16", "float16", "half", "bf16", "bfloat16".
std::optional<DType> parse_float_dtype(std::string_view s);

}  // namespace lathe
