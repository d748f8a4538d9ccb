// A tensor ready to be written into a safetensors file: its name, safetensors dtype, PyTorch shape
// and little-endian bytes. The checkpoint layouts (gptq_layout, awq_layout,
// compressed_tensors_layout) turn quantized matrices into these.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "engine/quant/safetensors_writer.h"

namespace lathe {

struct PackedTensor {
  SafetensorsTensorSpec spec;
  std::vector<uint8_t> data;
};

// Little-endian int32 words -> bytes.
inline std::vector<uint8_t> int32_bytes(const std::vector<int32_t>& words) {
  std::vector<uint8_t> b(words.size() * 4);
  if (!words.empty()) std::memcpy(b.data(), words.data(), b.size());
  return b;
}

// Scales as f16 / bf16 / f32 bytes ("F16", "BF16", "F32").
std::vector<uint8_t> float_bytes(const std::vector<float>& values, const std::string& dtype);

}  // namespace lathe
