#include "engine/quant/fp8.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "engine/core/thread_pool.h"

namespace lathe {
namespace {

std::array<float, 256> make_e4m3_table() {
  std::array<float, 256> t{};
  for (int c = 0; c < 256; ++c) {
    const int exp = (c >> 3) & 15, mant = c & 7;
    float v;
    if ((c & 0x7f) == 0x7f) {
      v = std::nanf("");
    } else if (exp == 0) {
      v = std::ldexp(static_cast<float>(mant), -9);
    } else {
      v = std::ldexp(1.f + static_cast<float>(mant) / 8.f, exp - 7);
    }
    t[static_cast<size_t>(c)] = (c & 0x80) ? -v : v;
  }
  return t;
}

const std::array<float, 256>& e4m3_table() {
  static const std::array<float, 256> t = make_e4m3_table();
  return t;
}

}  // namespace

uint8_t f32_to_e4m3(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  const float a = std::fabs(x);
  if (std::isnan(a)) return static_cast<uint8_t>(sign | 0x7f);
  if (a >= kE4M3Max) return static_cast<uint8_t>(sign | 0x7e);  // saturate (also infinities)
  if (a < 0x1p-6f) {
    // Subnormal grid: multiples of 2^-9; 8 * 2^-9 is the smallest normal (code 0x08).
    const float q = std::nearbyint(a * 0x1p9f);  // exact scaling, then ties to even
    return static_cast<uint8_t>(sign | static_cast<uint8_t>(q));
  }
  int e = 0;
  const float m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  // a = (1 + f) * 2^(e-1): f * 8 rounded is the 3-bit mantissa.
  int exp = e - 1;
  float mant = std::nearbyint((m * 2.f - 1.f) * 8.f);
  if (mant >= 8.f) {
    mant = 0.f;
    ++exp;
  }
  const int code = ((exp + 7) << 3) | static_cast<int>(mant);
  if (code > 0x7e) return static_cast<uint8_t>(sign | 0x7e);  // rounding up past 448
  return static_cast<uint8_t>(sign | code);
}

float e4m3_to_f32(uint8_t code) {
  return e4m3_table()[code];
}

const char* fp8_scale_kind_name(Fp8ScaleKind kind) {
  switch (kind) {
    case Fp8ScaleKind::kTensor:
      return "tensor";
    case Fp8ScaleKind::kChannel:
      return "channel";
    case Fp8ScaleKind::kBlock:
      return "block";
  }
  return "?";
}

int64_t Fp8Matrix::scale_rows() const {
  switch (kind) {
    case Fp8ScaleKind::kTensor:
      return 1;
    case Fp8ScaleKind::kChannel:
      return rows;
    case Fp8ScaleKind::kBlock:
      return (rows + kFp8BlockSize - 1) / kFp8BlockSize;
  }
  return 1;
}

int64_t Fp8Matrix::scale_cols() const {
  return kind == Fp8ScaleKind::kBlock ? (cols + kFp8BlockSize - 1) / kFp8BlockSize : 1;
}

float Fp8Matrix::scale_of(int64_t row, int64_t col) const {
  switch (kind) {
    case Fp8ScaleKind::kTensor:
      return scales[0];
    case Fp8ScaleKind::kChannel:
      return scales[static_cast<size_t>(row)];
    case Fp8ScaleKind::kBlock:
      return scales[static_cast<size_t>((row / kFp8BlockSize) * scale_cols() +
                                        col / kFp8BlockSize)];
  }
  return 1.f;
}

Fp8Matrix quantize_fp8(const float* w, int64_t rows, int64_t cols, Fp8ScaleKind kind) {
  Fp8Matrix m;
  m.rows = rows;
  m.cols = cols;
  m.kind = kind;
  m.codes.resize(static_cast<size_t>(rows * cols));
  m.scales.assign(static_cast<size_t>(m.scale_rows() * m.scale_cols()), 0.f);
  // amax of every scale's region, then scale = amax / 448.
  const int64_t sc = m.scale_cols();
  // On the pool; max is exact in any order, so the scales do not depend on the split.
  ThreadPool& pool = ThreadPool::global();
  if (kind == Fp8ScaleKind::kTensor) {
    std::vector<float> part(static_cast<size_t>(rows), 0.f);  // per-row amax
    pool.parallel_for(rows, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        float a = 0.f;
        for (int64_t c = 0; c < cols; ++c) a = std::max(a, std::fabs(w[r * cols + c]));
        part[static_cast<size_t>(r)] = a;
      }
    });
    for (float a : part) m.scales[0] = std::max(m.scales[0], a);
  } else {
    // Tasks own whole scale rows (a channel, or a band of kFp8BlockSize rows).
    const int64_t band = kind == Fp8ScaleKind::kChannel ? 1 : kFp8BlockSize;
    pool.parallel_for(m.scale_rows(), [&](int64_t b0, int64_t b1) {
      for (int64_t r = b0 * band; r < std::min(rows, b1 * band); ++r)
        for (int64_t c = 0; c < cols; ++c) {
          const size_t s = kind == Fp8ScaleKind::kChannel
                               ? static_cast<size_t>(r)
                               : static_cast<size_t>((r / kFp8BlockSize) * sc + c / kFp8BlockSize);
          m.scales[s] = std::max(m.scales[s], std::fabs(w[r * cols + c]));
        }
    });
  }
  for (float& s : m.scales) s = s > 0.f && std::isfinite(s) ? s / kE4M3Max : 1.f;
  pool.parallel_for(
      rows,
      [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r)
          for (int64_t c = 0; c < cols; ++c)
            m.codes[static_cast<size_t>(r * cols + c)] =
                f32_to_e4m3(w[r * cols + c] / m.scale_of(r, c));
      },
      std::max<int64_t>(1, 4096 / std::max<int64_t>(cols, 1)));
  return m;
}

std::vector<float> dequantize_fp8(const Fp8Matrix& m) {
  std::vector<float> out(static_cast<size_t>(m.rows * m.cols));
  for (int64_t r = 0; r < m.rows; ++r)
    for (int64_t c = 0; c < m.cols; ++c) out[static_cast<size_t>(r * m.cols + c)] = m.value(r, c);
  return out;
}

}  // namespace lathe
