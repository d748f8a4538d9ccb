#include "engine/quant/int_quant.h"

#include <algorithm>
#include <cmath>

#include "engine/core/half.h"
#include "engine/core/strings.h"
#include "engine/core/thread_pool.h"

namespace lathe {

Status validate_int_quant_config(const IntQuantConfig& c, int64_t cols) {
  if (c.bits != 4 && c.bits != 8)
    return invalid_argument(strformat("bits must be 4 or 8, got %d", c.bits));
  if (c.group_size == 0 || c.group_size < -1)
    return invalid_argument(
        strformat("group size must be positive or -1 (one group per output channel), got %lld",
                  static_cast<long long>(c.group_size)));
  if (cols <= 0) return invalid_argument("the matrix has no columns");
  if (c.group_size > 0 && cols % c.group_size != 0)
    return invalid_argument(strformat(
        "group size %lld does not divide the %lld input columns; pick a group size that divides "
        "it (e.g. 32, 64 or 128) or -1 for one group per output channel",
        static_cast<long long>(c.group_size), static_cast<long long>(cols)));
  if (c.scale_dtype != DType::kF32 && c.scale_dtype != DType::kF16 && c.scale_dtype != DType::kBF16)
    return invalid_argument("scales must be stored as f32, f16 or bf16");
  if (c.min_zero < 0 || c.min_zero >= (1 << c.bits))
    return invalid_argument(
        strformat("min_zero %d is outside the %d-bit range", c.min_zero, c.bits));
  return Status();
}

float round_scale_to(float scale, DType dtype) {
  float r = scale;
  if (dtype == DType::kF16) {
    r = f16_to_f32(f32_to_f16(scale));
    if (!(r > 0.f)) r = f16_to_f32(1);  // the smallest f16 subnormal
    if (std::isinf(r)) r = 65504.f;
  } else if (dtype == DType::kBF16) {
    r = bf16_to_f32(f32_to_bf16(scale));
    if (!(r > 0.f)) r = bf16_to_f32(1);
  }
  return r;
}

IntGroupParams int_grid_params(float min, float max, const IntQuantConfig& c) {
  const int32_t max_code = (1 << c.bits) - 1;
  min = std::min(min, 0.f);
  max = std::max(max, 0.f);
  if (c.symmetric) {
    const float a = std::max(std::fabs(min), max);
    min = -a;
    max = a;
  }
  if (min == 0.f && max == 0.f) {
    min = -1.f;
    max = 1.f;
  }
  IntGroupParams p;
  p.scale = round_scale_to((max - min) / static_cast<float>(max_code), c.scale_dtype);
  if (c.symmetric) {
    p.zero = 1 << (c.bits - 1);
  } else {
    const float z = std::nearbyint(-min / p.scale);
    p.zero = static_cast<int32_t>(
        std::clamp(z, static_cast<float>(c.min_zero), static_cast<float>(max_code)));
  }
  return p;
}

IntQuantizedMatrix IntQuantizedMatrix::empty(int64_t rows, int64_t cols, const IntQuantConfig& c) {
  IntQuantizedMatrix q;
  q.rows = rows;
  q.cols = cols;
  q.bits = c.bits;
  q.group_size = effective_group_size(c, cols);
  q.symmetric = c.symmetric;
  q.codes.assign(static_cast<size_t>(rows * cols), 0);
  q.scales.assign(static_cast<size_t>(rows * q.num_groups()), 1.f);
  q.zeros.assign(static_cast<size_t>(rows * q.num_groups()), 0);
  q.g_idx.resize(static_cast<size_t>(cols));
  for (int64_t k = 0; k < cols; ++k)
    q.g_idx[static_cast<size_t>(k)] = static_cast<int32_t>(k / q.group_size);
  return q;
}

Result<IntQuantizedMatrix> quantize_int_rtn(const float* w, int64_t rows, int64_t cols,
                                            const IntQuantConfig& c) {
  LATHE_RETURN_IF_ERROR(validate_int_quant_config(c, cols));
  IntQuantizedMatrix q = IntQuantizedMatrix::empty(rows, cols, c);
  const int64_t g = q.group_size, ng = q.num_groups();
  const int32_t max_code = (1 << c.bits) - 1;
  ThreadPool::global().parallel_for(
      rows,
      [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          const float* row = w + r * cols;
          for (int64_t j = 0; j < ng; ++j) {
            const float* x = row + j * g;
            float lo = x[0], hi = x[0];
            for (int64_t i = 1; i < g; ++i) {
              lo = std::min(lo, x[i]);
              hi = std::max(hi, x[i]);
            }
            const IntGroupParams p = int_grid_params(lo, hi, c);
            q.scales[static_cast<size_t>(r * ng + j)] = p.scale;
            q.zeros[static_cast<size_t>(r * ng + j)] = p.zero;
            uint8_t* out = q.codes.data() + r * cols + j * g;
            for (int64_t i = 0; i < g; ++i)
              out[i] = static_cast<uint8_t>(int_code(x[i], p, max_code));
          }
        }
      },
      std::max<int64_t>(1, 4096 / std::max<int64_t>(cols, 1)));
  return q;
}

std::vector<float> dequantize_int(const IntQuantizedMatrix& q) {
  std::vector<float> out(static_cast<size_t>(q.rows * q.cols));
  ThreadPool::global().parallel_for(q.rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t k = 0; k < q.cols; ++k) out[static_cast<size_t>(r * q.cols + k)] = q.value(r, k);
  });
  return out;
}

}  // namespace lathe
