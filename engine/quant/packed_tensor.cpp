#include "engine/quant/packed_tensor.h"

#include "engine/core/half.h"
#include "engine/core/thread_pool.h"

namespace lathe {

std::vector<uint8_t> float_bytes(const std::vector<float>& values, const std::string& dtype) {
  if (dtype == "F32") {
    std::vector<uint8_t> b(values.size() * 4);
    if (!values.empty()) std::memcpy(b.data(), values.data(), b.size());
    return b;
  }
  // Converted on the thread pool in chunks of at least 64 Ki values (a smaller tensor runs inline):
  // the 8B shape's embedding and LM head are 525 M values each.
  std::vector<uint8_t> b(values.size() * 2);
  const bool bf16 = dtype == "BF16";
  ThreadPool::global().parallel_for(
      static_cast<int64_t>(values.size()),
      [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) {
          const uint16_t h = bf16 ? f32_to_bf16(values[static_cast<size_t>(i)])
                                  : f32_to_f16(values[static_cast<size_t>(i)]);
          std::memcpy(b.data() + 2 * i, &h, 2);
        }
      },
      int64_t{1} << 16);
  return b;
}

}  // namespace lathe
