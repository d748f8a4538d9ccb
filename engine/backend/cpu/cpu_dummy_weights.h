// Seeded random weights for `--load-format dummy` on the CPU (internal to engine/backend/cpu).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/core/tensor_view.h"

namespace lathe {
class ThreadPool;
}

namespace lathe::cpu {

// A [rows, cols] tensor of `dtype` (f32 or bf16) with elements uniform in [-std·√3, std·√3] (so the
// standard deviation is `std`). Element i is a function of (seed, stream, i) only: the same weights
// for any thread count. The bytes are appended to `owned`; the returned view points into them.
TensorView make_random_matrix(DType dtype, int64_t rows, int64_t cols, float std, uint64_t seed,
                              uint64_t stream, std::vector<std::unique_ptr<uint8_t[]>>& owned,
                              ThreadPool& pool);

}  // namespace lathe::cpu
