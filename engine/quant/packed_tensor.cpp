#include "engine/quant/packed_tensor.h"

#include "engine/core/half.h"

namespace lathe {

std::vector<uint8_t> float_bytes(const std::vector<float>& values, const std::string& dtype) {
  if (dtype == "F32") {
    std::vector<uint8_t> b(values.size() * 4);
    if (!values.empty()) std::memcpy(b.data(), values.data(), b.size());
    return b;
  }
  std::vector<uint8_t> b(values.size() * 2);
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t h = dtype == "BF16" ? f32_to_bf16(values[i]) : f32_to_f16(values[i]);
    std::memcpy(b.data() + 2 * i, &h, 2);
  }
  return b;
}

}  // namespace lathe
