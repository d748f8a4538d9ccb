#include "engine/backend/cpu/cpu_dummy_weights.h"

#include <cmath>
#include <cstring>

#include "engine/core/half.h"
#include "engine/core/philox.h"
#include "engine/core/thread_pool.h"

namespace lathe::cpu {

TensorView make_random_matrix(DType dtype, int64_t rows, int64_t cols, float std, uint64_t seed,
                              uint64_t stream, std::vector<std::unique_ptr<uint8_t[]>>& owned,
                              ThreadPool& pool) {
  const int64_t n = rows * cols;
  const int64_t elem = dtype == DType::kF32 ? 4 : 2;
  owned.push_back(std::make_unique<uint8_t[]>(static_cast<size_t>(n * elem)));
  uint8_t* bytes = owned.back().get();
  const float half_width = std * std::sqrt(3.0f);
  // Four uniforms per Philox call: element i uses word i % 4 of counter i / 4.
  pool.parallel_for((n + 3) / 4,
                    [&](int64_t begin, int64_t end) {
                      for (int64_t c = begin; c < end; ++c) {
                        const Philox4 r = philox4x32_10(
                            static_cast<uint32_t>(c), static_cast<uint32_t>(c >> 32),
                            static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32),
                            static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
                        for (int64_t j = 0; j < 4 && 4 * c + j < n; ++j) {
                          const float u =
                              static_cast<float>(r.v[j] >> 8) * (1.0f / 16777216.0f);  // [0, 1)
                          const float value = (2.0f * u - 1.0f) * half_width;
                          const int64_t i = 4 * c + j;
                          if (dtype == DType::kF32) {
                            std::memcpy(bytes + 4 * i, &value, 4);
                          } else {
                            const uint16_t h = f32_to_bf16(value);
                            std::memcpy(bytes + 2 * i, &h, 2);
                          }
                        }
                      }
                    },
                    4096);
  return make_view(dtype == DType::kF32 ? DType::kF32 : DType::kBF16, {rows, cols}, bytes);
}

}  // namespace lathe::cpu
