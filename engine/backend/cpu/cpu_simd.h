// SIMD building blocks of the CPU ops (internal to engine/backend/cpu), each with a scalar twin
// that performs the same float32 operations in the same order, so both paths give bit-identical
// results.
//
// The canonical dot product of two length-K vectors (used by linear and attention):
//   eight lanes; lane l accumulates acc[l] = fma(a[k], b[k], acc[l]) for k = l, l + 8, l + 16, ...
//   (missing elements of a last partial group count as 0), then
//   ((acc0 + acc4) + (acc2 + acc6)) + ((acc1 + acc5) + (acc3 + acc7)).
// exp: Cephes' single-precision polynomial (about 1 ulp on [-87, 88]), evaluated with fused
// multiply-adds; inputs are clamped to [-87.33654, 88.37626], so exp(-inf) is a tiny positive
// number
// (~1e-38), never 0.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define LATHE_CPU_X86 1
#define LATHE_AVX2 __attribute__((target("avx2,fma,f16c")))
#else
#define LATHE_CPU_X86 0
#endif

namespace lathe::cpu::detail {

inline float reduce_lanes(const float* a) {
  return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

// Canonical dot product, scalar.
inline float dot_scalar(const float* a, const float* b, int64_t k) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= k; i += 8)
    for (int l = 0; l < 8; ++l) acc[l] = std::fma(a[i + l], b[i + l], acc[l]);
  if (i < k)
    for (int l = 0; l < 8; ++l)
      acc[l] = std::fma(i + l < k ? a[i + l] : 0.f, i + l < k ? b[i + l] : 0.f, acc[l]);
  return reduce_lanes(acc);
}

constexpr float kExpHi = 88.3762626647949f;
constexpr float kExpLo = -87.3365447504019f;
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kExpC1 = 0.693359375f;
constexpr float kExpC2 = -2.12194440e-4f;
constexpr float kExpP0 = 1.9875691500e-4f;
constexpr float kExpP1 = 1.3981999507e-3f;
constexpr float kExpP2 = 8.3334519073e-3f;
constexpr float kExpP3 = 4.1665795894e-2f;
constexpr float kExpP4 = 1.6666665459e-1f;
constexpr float kExpP5 = 5.0000001201e-1f;

inline float exp_scalar(float x) {
  x = std::fmin(std::fmax(x, kExpLo), kExpHi);
  const float n = std::nearbyint(x * kLog2e);
  x = std::fma(n, -kExpC1, x);
  x = std::fma(n, -kExpC2, x);
  float y = kExpP0;
  y = std::fma(y, x, kExpP1);
  y = std::fma(y, x, kExpP2);
  y = std::fma(y, x, kExpP3);
  y = std::fma(y, x, kExpP4);
  y = std::fma(y, x, kExpP5);
  y = std::fma(y, x * x, x);
  y = y + 1.0f;
  const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  return y * scale;
}

#if LATHE_CPU_X86
LATHE_AVX2 inline float reduce_avx2(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));  // a0+a4 .. a3+a7
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));  // (a0+a4)+(a2+a6), (a1+a5)+(a3+a7)
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

// Mask of the first `n` (0..8) lanes, for partial loads.
LATHE_AVX2 inline __m256i lane_mask_avx2(int64_t n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(n)), idx);
}

LATHE_AVX2 inline float dot_avx2(const float* a, const float* b, int64_t k) {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= k; i += 8)
    acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  if (i < k) {
    const __m256i m = lane_mask_avx2(k - i);
    acc = _mm256_fmadd_ps(_mm256_maskload_ps(a + i, m), _mm256_maskload_ps(b + i, m), acc);
  }
  return reduce_avx2(acc);
}

LATHE_AVX2 inline __m256 exp_avx2(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(kExpLo)), _mm256_set1_ps(kExpHi));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  x = _mm256_fmadd_ps(n, _mm256_set1_ps(-kExpC1), x);
  x = _mm256_fmadd_ps(n, _mm256_set1_ps(-kExpC2), x);
  __m256 y = _mm256_set1_ps(kExpP0);
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(kExpP1));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(kExpP2));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(kExpP3));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(kExpP4));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(kExpP5));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(x, x), x);
  y = _mm256_add_ps(y, _mm256_set1_ps(1.0f));
  const __m256i bits =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(bits));
}
#endif

}  // namespace lathe::cpu::detail
