// Block dequantization for the CPU ops (internal to engine/backend/cpu).
//
// Each function turns one block of a GGUF type into float32 with exactly the arithmetic of ggml's
// reference dequantize_row_* (and of the gguf Python package): the same products and sums in the
// same order, each rounded to float32 (the CPU sources compile with -ffp-contract=off, so no fused
// multiply-adds creep in). The SIMD paths in cpu_linear.cpp produce bit-identical values.
// Independent of engine/model's dequantize_row on purpose: the ops tests compare the two.
#pragma once

#include <cstdint>
#include <cstring>

#include "engine/core/dtype.h"
#include "engine/core/half.h"
#include "engine/model/dequant.h"

namespace lathe::cpu::detail {

inline float load_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// Q8_0: f16 d; i8 q[32]. x = q * d.
inline void dequant_block_q8_0(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const int8_t* q = reinterpret_cast<const int8_t*>(b + 2);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(q[j]) * d;
}

// Q4_0: f16 d; u8 qs[16]. x[j] = ((qs[j] & 15) - 8) * d, x[j + 16] = ((qs[j] >> 4) - 8) * d.
inline void dequant_block_q4_0(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>((qs[j] & 0x0F) - 8) * d;
    y[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
  }
}

// Q4_1: f16 d, m; u8 qs[16]. x = q * d + m.
inline void dequant_block_q4_1(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const float m = load_f16(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>(qs[j] & 0x0F) * d + m;
    y[j + 16] = static_cast<float>(qs[j] >> 4) * d + m;
  }
}

// Q5_0: f16 d; u32 qh; u8 qs[16]. Fifth bit of weight j is bit j of qh. x = (q - 16) * d.
inline void dequant_block_q5_0(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  uint32_t qh;
  std::memcpy(&qh, b + 2, 4);
  const uint8_t* qs = b + 6;
  for (int j = 0; j < 16; ++j) {
    const uint8_t h0 = static_cast<uint8_t>(((qh >> j) << 4) & 0x10);
    const uint8_t h1 = static_cast<uint8_t>((qh >> (j + 12)) & 0x10);
    y[j] = static_cast<float>(((qs[j] & 0x0F) | h0) - 16) * d;
    y[j + 16] = static_cast<float>(((qs[j] >> 4) | h1) - 16) * d;
  }
}

// Q5_1: f16 d, m; u32 qh; u8 qs[16]. x = q * d + m.
inline void dequant_block_q5_1(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const float m = load_f16(b + 2);
  uint32_t qh;
  std::memcpy(&qh, b + 4, 4);
  const uint8_t* qs = b + 8;
  for (int j = 0; j < 16; ++j) {
    const uint8_t h0 = static_cast<uint8_t>(((qh >> j) << 4) & 0x10);
    const uint8_t h1 = static_cast<uint8_t>((qh >> (j + 12)) & 0x10);
    y[j] = static_cast<float>((qs[j] & 0x0F) | h0) * d + m;
    y[j + 16] = static_cast<float>((qs[j] >> 4) | h1) * d + m;
  }
}

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K block.
inline void k_scale_min(int j, const uint8_t* s, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

// Q4_K: f16 d, dmin; u8 scales[12]; u8 qs[128]. 256 weights; x = (d * sc) * q - (dmin * m).
inline void dequant_block_q4_k(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const float dmin = load_f16(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* q = b + 16;
  for (int c = 0; c < 4; ++c) {
    uint8_t sc, m;
    k_scale_min(2 * c, scales, &sc, &m);
    const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
    k_scale_min(2 * c + 1, scales, &sc, &m);
    const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) y[l] = d1 * static_cast<float>(q[l] & 0x0F) - m1;
    for (int l = 0; l < 32; ++l) y[32 + l] = d2 * static_cast<float>(q[l] >> 4) - m2;
    q += 32;
    y += 64;
  }
}

// Q5_K: f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]. Like Q4_K with a fifth bit from qh.
inline void dequant_block_q5_k(const uint8_t* b, float* y) {
  const float d = load_f16(b);
  const float dmin = load_f16(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* ql = b + 48;
  uint8_t u1 = 1, u2 = 2;
  for (int c = 0; c < 4; ++c) {
    uint8_t sc, m;
    k_scale_min(2 * c, scales, &sc, &m);
    const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
    k_scale_min(2 * c + 1, scales, &sc, &m);
    const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
    for (int l = 0; l < 32; ++l)
      y[l] = d1 * static_cast<float>((ql[l] & 0x0F) + ((qh[l] & u1) ? 16 : 0)) - m1;
    for (int l = 0; l < 32; ++l)
      y[32 + l] = d2 * static_cast<float>((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
    ql += 32;
    y += 64;
    u1 = static_cast<uint8_t>(u1 << 2);
    u2 = static_cast<uint8_t>(u2 << 2);
  }
}

// Q6_K: u8 ql[128]; u8 qh[64]; i8 sc[16]; f16 d. 256 weights; x = (d * sc) * (q - 32).
inline void dequant_block_q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = load_f16(b + 208);
  for (int n = 0; n < 2; ++n) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = static_cast<int8_t>((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = static_cast<int8_t>((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = static_cast<int8_t>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = static_cast<int8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * static_cast<float>(sc[is + 0]) * static_cast<float>(q1);
      y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
      y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
      y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

// Q2_K: u8 scales[16]; u8 qs[64]; f16 d, dmin. 256 weights in 16 sub-blocks of 16; sub-block
// (half h, shift step j, part p) reads bits 2j of qs[32h + 16p + l]; x = (d * sc) * q - (dmin * m)
// with sc, m the low and high nibble of its scale byte.
inline void dequant_block_q2_k(const uint8_t* b, float* y) {
  const uint8_t* q = b + 16;
  const float d = load_f16(b + 80);
  const float dmin = load_f16(b + 82);
  int is = 0;
  for (int n = 0; n < 256; n += 128) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int p = 0; p < 2; ++p) {
        const uint8_t sc = b[is++];
        const float dl = d * static_cast<float>(sc & 0x0F), ml = dmin * static_cast<float>(sc >> 4);
        for (int l = 0; l < 16; ++l)
          *y++ = dl * static_cast<float>((q[16 * p + l] >> shift) & 3) - ml;
      }
    }
    q += 32;
  }
}

// Q3_K: u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d. Q2_K's 2-bit layout plus a high bit from
// hmask (bit k of hmask[l] for the k-th shift step over both halves; a clear bit subtracts 4);
// sixteen 6-bit scales (low nibbles in bytes 0..7, high bit pairs in bytes 8..11), offset 32;
// x = (d * (sc - 32)) * q.
inline void dequant_block_q3_k(const uint8_t* b, float* y) {
  const uint8_t* hm = b;
  const uint8_t* q = b + 32;
  uint32_t aux[4];
  std::memcpy(aux, b + 96, 12);
  const uint32_t tmp = aux[2], m2 = 0x0f0f0f0f, m1 = 0x03030303;
  aux[2] = ((aux[0] >> 4) & m2) | (((tmp >> 4) & m1) << 4);
  aux[3] = ((aux[1] >> 4) & m2) | (((tmp >> 6) & m1) << 4);
  aux[0] = (aux[0] & m2) | (((tmp >> 0) & m1) << 4);
  aux[1] = (aux[1] & m2) | (((tmp >> 2) & m1) << 4);
  int8_t scales[16];
  std::memcpy(scales, aux, 16);
  const float d = load_f16(b + 108);
  int is = 0;
  uint8_t m = 1;
  for (int n = 0; n < 256; n += 128) {
    for (int shift = 0; shift < 8; shift += 2, m = static_cast<uint8_t>(m << 1)) {
      for (int p = 0; p < 2; ++p) {
        const float dl = d * static_cast<float>(scales[is++] - 32);
        for (int l = 0; l < 16; ++l) {
          const int i = 16 * p + l;
          *y++ = dl * static_cast<float>(((q[i] >> shift) & 3) - ((hm[i] & m) ? 0 : 4));
        }
      }
    }
    q += 32;
  }
}

// Dequantizes `k` elements (a whole number of blocks) of one row of `type` into y. Returns false
// for a type the CPU ops cannot read (f8, integers).
inline bool dequant_row(DType type, const uint8_t* row, float* y, int64_t k) {
  switch (type) {
    case DType::kF32:
      std::memcpy(y, row, static_cast<size_t>(k) * 4);
      return true;
    case DType::kF16:
      for (int64_t i = 0; i < k; ++i) y[i] = load_f16(row + 2 * i);
      return true;
    case DType::kBF16:
      for (int64_t i = 0; i < k; ++i) {
        uint16_t h;
        std::memcpy(&h, row + 2 * i, 2);
        y[i] = bf16_to_f32(h);
      }
      return true;
    default:
      break;
  }
  void (*fn)(const uint8_t*, float*) = nullptr;
  switch (type) {
    case DType::kQ8_0:
      fn = dequant_block_q8_0;
      break;
    case DType::kQ4_0:
      fn = dequant_block_q4_0;
      break;
    case DType::kQ4_1:
      fn = dequant_block_q4_1;
      break;
    case DType::kQ5_0:
      fn = dequant_block_q5_0;
      break;
    case DType::kQ5_1:
      fn = dequant_block_q5_1;
      break;
    case DType::kQ4_K:
      fn = dequant_block_q4_k;
      break;
    case DType::kQ5_K:
      fn = dequant_block_q5_k;
      break;
    case DType::kQ6_K:
      fn = dequant_block_q6_k;
      break;
    case DType::kQ2_K:
      fn = dequant_block_q2_k;
      break;
    case DType::kQ3_K:
      fn = dequant_block_q3_k;
      break;
    default:
      return false;
  }
  const DTypeInfo& info = dtype_info(type);
  for (int64_t b = 0; b < k / info.block_size; ++b)
    fn(row + b * info.block_bytes, y + b * info.block_size);
  return true;
}

// Whether the CPU ops can use a weight of this type: every type the loader dequantizes.
inline bool is_supported_weight_type(DType type) {
  return can_dequantize(type);
}

}  // namespace lathe::cpu::detail
