#include "engine/quant/ggml_quantize.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "engine/core/half.h"
#include "engine/core/strings.h"
#include "engine/core/thread_pool.h"

namespace lathe {
namespace {

constexpr int kQk = 32;  // weights per block of the 32-weight types

inline void store_f16(uint8_t* p, float v) {
  const uint16_t h = f32_to_f16(v);
  std::memcpy(p, &h, 2);
}

// The value of largest magnitude (the first one on ties) and that magnitude.
inline void signed_absmax(const float* x, float* amax, float* max) {
  *amax = 0.f;
  *max = 0.f;
  for (int j = 0; j < kQk; ++j) {
    if (*amax < std::fabs(x[j])) {
      *amax = std::fabs(x[j]);
      *max = x[j];
    }
  }
}

inline void min_max(const float* x, float* lo, float* hi) {
  *lo = FLT_MAX;
  *hi = -FLT_MAX;
  for (int j = 0; j < kQk; ++j) {
    if (x[j] < *lo) *lo = x[j];
    if (x[j] > *hi) *hi = x[j];
  }
}

// Block: f16 d; i8 q[32].
void quantize_q8_0(const float* x, uint8_t* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kQk, y += 34) {
    float amax = 0.f;
    for (int j = 0; j < kQk; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.f;
    const float id = d != 0.f ? 1.f / d : 0.f;
    store_f16(y, d);
    for (int j = 0; j < kQk; ++j) {
      const int8_t q = static_cast<int8_t>(std::round(x[j] * id));  // half away from zero
      std::memcpy(y + 2 + j, &q, 1);
    }
  }
}

// Block: f16 d; u8 qs[16] (weight j low nibble, weight j+16 high nibble).
void quantize_q4_0(const float* x, uint8_t* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kQk, y += 18) {
    float amax, max;
    signed_absmax(x, &amax, &max);
    const float d = max / -8.f;
    const float id = d != 0.f ? 1.f / d : 0.f;
    store_f16(y, d);
    for (int j = 0; j < kQk / 2; ++j) {
      const int lo = std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f)));
      const int hi = std::min(15, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 8.5f)));
      y[2 + j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

// Block: f16 d, m; u8 qs[16].
void quantize_q4_1(const float* x, uint8_t* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kQk, y += 20) {
    float lo, hi;
    min_max(x, &lo, &hi);
    const float d = (hi - lo) / 15.f;
    const float id = d != 0.f ? 1.f / d : 0.f;
    store_f16(y, d);
    store_f16(y + 2, lo);
    for (int j = 0; j < kQk / 2; ++j) {
      const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>((x[j] - lo) * id + 0.5f)));
      const int q1 =
          std::min(15, static_cast<int>(static_cast<int8_t>((x[j + 16] - lo) * id + 0.5f)));
      y[4 + j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

// Packs 32 five-bit values: low nibbles as in q4_0, bit 4 of weight j into bit j of qh.
void pack_q5(const int* q, uint8_t* qh_out, uint8_t* qs) {
  uint32_t qh = 0;
  for (int j = 0; j < kQk / 2; ++j) {
    qs[j] = static_cast<uint8_t>((q[j] & 0x0F) | ((q[j + 16] & 0x0F) << 4));
    qh |= static_cast<uint32_t>((q[j] & 0x10) >> 4) << j;
    qh |= static_cast<uint32_t>((q[j + 16] & 0x10) >> 4) << (j + 16);
  }
  std::memcpy(qh_out, &qh, 4);
}

// Block: f16 d; u8 qh[4]; u8 qs[16].
void quantize_q5_0(const float* x, uint8_t* y, int64_t nb) {
  int q[kQk];
  for (int64_t b = 0; b < nb; ++b, x += kQk, y += 22) {
    float amax, max;
    signed_absmax(x, &amax, &max);
    const float d = max / -16.f;
    const float id = d != 0.f ? 1.f / d : 0.f;
    store_f16(y, d);
    for (int j = 0; j < kQk; ++j)
      q[j] = std::min(31, static_cast<int>(static_cast<int8_t>(x[j] * id + 16.5f)));
    pack_q5(q, y + 2, y + 6);
  }
}

// Block: f16 d, m; u8 qh[4]; u8 qs[16].
void quantize_q5_1(const float* x, uint8_t* y, int64_t nb) {
  int q[kQk];
  for (int64_t b = 0; b < nb; ++b, x += kQk, y += 24) {
    float lo, hi;
    min_max(x, &lo, &hi);
    const float d = (hi - lo) / 31.f;
    const float id = d != 0.f ? 1.f / d : 0.f;
    store_f16(y, d);
    store_f16(y + 2, lo);
    for (int j = 0; j < kQk; ++j)
      q[j] = static_cast<int>(static_cast<uint8_t>((x[j] - lo) * id + 0.5f));
    pack_q5(q, y + 4, y + 8);
  }
}

}  // namespace

bool can_quantize_ggml(DType type) {
  switch (type) {
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
      return true;
    default:
      return false;
  }
}

void quantize_row_ggml(DType type, const float* src, uint8_t* dst, int64_t n) {
  const int64_t nb = n / dtype_info(type).block_size;
  switch (type) {
    case DType::kQ8_0:
      return quantize_q8_0(src, dst, nb);
    case DType::kQ4_0:
      return quantize_q4_0(src, dst, nb);
    case DType::kQ4_1:
      return quantize_q4_1(src, dst, nb);
    case DType::kQ5_0:
      return quantize_q5_0(src, dst, nb);
    case DType::kQ5_1:
      return quantize_q5_1(src, dst, nb);
    case DType::kQ4_K:
      return quantize_row_q4_k(src, dst, n);
    case DType::kQ5_K:
      return quantize_row_q5_k(src, dst, n);
    case DType::kQ6_K:
      return quantize_row_q6_k(src, dst, n);
    default:
      return;
  }
}

Status quantize_rows_ggml(DType type, const float* src, int64_t rows, int64_t cols, uint8_t* dst) {
  if (!can_quantize_ggml(type))
    return invalid_argument("cannot write GGUF type " + std::string(dtype_name(type)));
  const DTypeInfo& info = dtype_info(type);
  if (cols <= 0 || cols % info.block_size != 0)
    return invalid_argument(strformat("%s needs rows that are a multiple of %lld weights, got %lld",
                                      std::string(info.name).c_str(),
                                      static_cast<long long>(info.block_size),
                                      static_cast<long long>(cols)));
  const int64_t row_bytes = cols / info.block_size * info.block_bytes;
  ThreadPool::global().parallel_for(
      rows,
      [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r)
          quantize_row_ggml(type, src + r * cols, dst + r * row_bytes, cols);
      },
      std::max<int64_t>(1, 8192 / cols));
  return Status();
}

}  // namespace lathe
