// AVX2 dequantization of 32 consecutive weights of a row into four registers (internal to
// engine/backend/cpu, included by cpu_linear.cpp only). Every type computes exactly the float32
// operations of its scalar twin in cpu_dequant.h, in the same order, so values are bit-identical.
//
// Interface of each Block type:
//   kBlockSize, kBlockBytes: the GGUF block (f16/bf16: 32 elements, 64 bytes);
//   load(row, g, w): weights 32g .. 32g+31 of the row into w[0..3] (weights 32g + 8i .. + 7 in
//   w[i]).
#pragma once

#include <cstdint>
#include <cstring>

#include "engine/backend/cpu/cpu_dequant.h"
#include "engine/backend/cpu/cpu_simd.h"

#if LATHE_CPU_X86
namespace lathe::cpu::detail {

// f16 -> f32 with F16C: exact, the same value as load_f16.
LATHE_AVX2 inline float load_f16_avx2(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// 32 small unsigned integers (one per byte, < 128) to floats, minus `offset` (exact integer math).
LATHE_AVX2 inline void bytes_to_f32(__m256i b, int32_t offset, __m256 w[4]) {
  const __m128i lo = _mm256_castsi256_si128(b), hi = _mm256_extracti128_si256(b, 1);
  const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
  const __m256i off = _mm256_set1_epi32(offset);
  for (int i = 0; i < 4; ++i)
    w[i] = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_cvtepu8_epi32(parts[i]), off));
}

// Low and high nibbles of 16 bytes as 32 bytes: byte j = low nibble of qs[j], byte j + 16 = high
// nibble.
LATHE_AVX2 inline __m256i nibbles16(const uint8_t* qs) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i m = _mm_set1_epi8(0x0F);
  return _mm256_setr_m128i(_mm_and_si128(q, m), _mm_and_si128(_mm_srli_epi16(q, 4), m));
}

// Bit i of `bits` (i = 0..31) as 16 in byte i, else 0.
LATHE_AVX2 inline __m256i bits_to_16(uint32_t bits) {
  const __m256i shuffle = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                           2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i select = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int32_t>(bits)), shuffle);
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, select), select);
  return _mm256_and_si256(set, _mm256_set1_epi8(16));
}

LATHE_AVX2 inline void scale(__m256 w[4], float d) {
  const __m256 dv = _mm256_set1_ps(d);
  for (int i = 0; i < 4; ++i) w[i] = _mm256_mul_ps(w[i], dv);
}

struct BlockF16 {
  static constexpr int64_t kBlockSize = 32, kBlockBytes = 64;
  LATHE_AVX2 static void load(const uint8_t* row, int64_t g, __m256 w[4]) {
    const uint8_t* p = row + 64 * g;
    for (int i = 0; i < 4; ++i)
      w[i] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * i)));
  }
};

struct BlockBF16 {
  static constexpr int64_t kBlockSize = 32, kBlockBytes = 64;
  LATHE_AVX2 static void load(const uint8_t* row, int64_t g, __m256 w[4]) {
    const uint8_t* p = row + 64 * g;
    for (int i = 0; i < 4; ++i) {
      const __m256i h =
          _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * i)));
      w[i] = _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
    }
  }
};

// x = q * d
struct BlockQ8_0 {
  static constexpr int64_t kBlockSize = 32, kBlockBytes = 34;
  LATHE_AVX2 static void load(const uint8_t* row, int64_t g, __m256 w[4]) {
    const uint8_t* blk = row + kBlockBytes * g;
    for (int i = 0; i < 4; ++i) {
      const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + 2 + 8 * i));
      w[i] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
    }
    scale(w, load_f16_avx2(blk));
  }
};

// Q4_0: x = (q - 8) * d;  Q4_1: x = q * d + m.
template <bool kHasMin>
struct BlockQ4 {
  static constexpr int64_t kBlockSize = 32, kBlockBytes = kHasMin ? 20 : 18;
  LATHE_AVX2 static void load(const uint8_t* row, int64_t g, __m256 w[4]) {
    const uint8_t* blk = row + kBlockBytes * g;
    bytes_to_f32(nibbles16(blk + (kHasMin ? 4 : 2)), kHasMin ? 0 : 8, w);
    scale(w, load_f16_avx2(blk));
    if constexpr (kHasMin) {
      const __m256 m = _mm256_set1_ps(load_f16_avx2(blk + 2));
      for (int i = 0; i < 4; ++i) w[i] = _mm256_add_ps(w[i], m);
    }
  }
};

// Q5_0: x = (q - 16) * d;  Q5_1: x = q * d + m. The fifth bit of weight i is bit i of qh.
template <bool kHasMin>
struct BlockQ5 {
  static constexpr int64_t kBlockSize = 32, kBlockBytes = kHasMin ? 24 : 22;
  LATHE_AVX2 static void load(const uint8_t* row, int64_t g, __m256 w[4]) {
    const uint8_t* blk = row + kBlockBytes * g;
    const int off = kHasMin ? 4 : 2;
    uint32_t qh;
    std::memcpy(&qh, blk + off, 4);
    bytes_to_f32(_mm256_or_si256(nibbles16(blk + off + 4), bits_to_16(qh)), kHasMin ? 0 : 16, w);
    scale(w, load_f16_avx2(blk));
    if constexpr (kHasMin) {
      const __m256 m = _mm256_set1_ps(load_f16_avx2(blk + 2));
      for (int i = 0; i < 4; ++i) w[i] = _mm256_add_ps(w[i], m);
    }
  }
};

// Q4_K / Q5_K: sub-block s (0..7) of 32 weights reads the low (s even) or high (s odd) nibbles of
// qs[32 (s / 2) ..], plus bit s of qh[l] for Q5_K; x = (d * sc) * q - (dmin * m).
template <bool kFive>
struct BlockK {
  static constexpr int64_t kBlockSize = 256, kBlockBytes = kFive ? 176 : 144;
  LATHE_AVX2 static void load(const uint8_t* row, int64_t g, __m256 w[4]) {
    const uint8_t* blk = row + kBlockBytes * (g / 8);
    const int s = static_cast<int>(g % 8);
    const uint8_t* qs = blk + (kFive ? 48 : 16) + 32 * (s / 2);
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs));
    __m256i q =
        _mm256_and_si256(s % 2 == 0 ? raw : _mm256_srli_epi16(raw, 4), _mm256_set1_epi8(0x0F));
    if constexpr (kFive) {
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16));
      const __m256i bit = _mm256_set1_epi8(static_cast<char>(1u << s));
      const __m256i has = _mm256_cmpeq_epi8(_mm256_and_si256(qh, bit), bit);
      q = _mm256_or_si256(q, _mm256_and_si256(has, _mm256_set1_epi8(16)));
    }
    bytes_to_f32(q, 0, w);
    uint8_t sc, m;
    k_scale_min(s, blk + 4, &sc, &m);
    const float d1 = load_f16_avx2(blk) * static_cast<float>(sc);
    const float m1 = load_f16_avx2(blk + 2) * static_cast<float>(m);
    scale(w, d1);
    const __m256 mv = _mm256_set1_ps(m1);
    for (int i = 0; i < 4; ++i) w[i] = _mm256_sub_ps(w[i], mv);
  }
};

// Q6_K: half n = (g % 8) / 4 of the block, quarter k = g % 4: weights 128 n + 32 k + l (l = 0..31)
// take 4 bits from ql[64 n + l + 32 (k & 1)] (low nibble for k < 2) and 2 bits from qh[32 n + l] at
// bit 2k; x = (d * sc[8 n + 2 k + l / 16]) * (q - 32).
struct BlockQ6_K {
  static constexpr int64_t kBlockSize = 256, kBlockBytes = 210;
  LATHE_AVX2 static void load(const uint8_t* row, int64_t g, __m256 w[4]) {
    const uint8_t* blk = row + kBlockBytes * (g / 8);
    const int n = static_cast<int>(g % 8) / 4, k = static_cast<int>(g % 4);
    const __m256i ql =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * n + 32 * (k & 1)));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 128 + 32 * n));
    const __m256i low =
        _mm256_and_si256(k < 2 ? ql : _mm256_srli_epi16(ql, 4), _mm256_set1_epi8(0x0F));
    const __m256i high = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), _mm256_set1_epi8(3));
    const __m256i q = _mm256_or_si256(low, _mm256_slli_epi16(high, 4));
    bytes_to_f32(q, 32, w);
    const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192 + 8 * n + 2 * k);
    const float d = load_f16_avx2(blk + 208);
    const __m256 d0 = _mm256_set1_ps(d * static_cast<float>(sc[0])),
                 d1 = _mm256_set1_ps(d * static_cast<float>(sc[1]));
    w[0] = _mm256_mul_ps(d0, w[0]);
    w[1] = _mm256_mul_ps(d0, w[1]);
    w[2] = _mm256_mul_ps(d1, w[2]);
    w[3] = _mm256_mul_ps(d1, w[3]);
  }
};

}  // namespace lathe::cpu::detail
#endif
