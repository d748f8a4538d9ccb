// FP8 E4M3 ("e4m3fn": 1 sign, 4 exponent bits with bias 7, 3 mantissa bits, no infinities,
// 0x7f/0xff are NaN, largest finite 448, subnormals down to 2^-9) and FP8 weight quantization with
// the scale granularities vLLM loads from compressed-tensors checkpoints: one scale per tensor, per
// output channel, or per 128 x 128 block, each scale = amax / 448 of what it covers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace lathe {

// float32 -> E4M3: round to nearest, ties to even; magnitudes above 448 (and infinities) saturate
// to +-448; NaN -> 0x7f with the sign; subnormals are rounded in the subnormal grid (2^-9 steps).
uint8_t f32_to_e4m3(float x);
// E4M3 -> float32 (exact).
float e4m3_to_f32(uint8_t code);

constexpr float kE4M3Max = 448.f;

enum class Fp8ScaleKind {
  kTensor,   // scales: [1]
  kChannel,  // scales: [N] (one per output row; stored as [N, 1])
  kBlock,    // scales: [ceil(N / 128), ceil(K / 128)], row-major
};
const char* fp8_scale_kind_name(Fp8ScaleKind kind);  // "tensor", "channel", "block"

constexpr int64_t kFp8BlockSize = 128;

// A [N, K] weight in FP8 with its scales: w ~= e4m3_to_f32(code) * scale.
struct Fp8Matrix {
  int64_t rows = 0;  // N
  int64_t cols = 0;  // K
  Fp8ScaleKind kind = Fp8ScaleKind::kChannel;
  std::vector<uint8_t> codes;  // [N, K]
  std::vector<float> scales;   // see Fp8ScaleKind

  int64_t scale_rows() const;
  int64_t scale_cols() const;
  float scale_of(int64_t row, int64_t col) const;
  float value(int64_t row, int64_t col) const {
    return e4m3_to_f32(codes[static_cast<size_t>(row * cols + col)]) * scale_of(row, col);
  }
};

// Quantizes w [rows, cols] row-major. A part whose values are all zero gets scale 1.
Fp8Matrix quantize_fp8(const float* w, int64_t rows, int64_t cols, Fp8ScaleKind kind);

std::vector<float> dequantize_fp8(const Fp8Matrix& m);

}  // namespace lathe
