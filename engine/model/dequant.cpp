#include "engine/model/dequant.h"

#include <algorithm>
#include <cassert>
#include <cstring>

#include "engine/core/half.h"
#include "engine/core/thread_pool.h"

namespace lathe {
namespace {

// IEEE half -> float without branches (the FP16 library's method), so loops over f16 data
// vectorize. Equal to f16_to_f32 for every input (all 65536 are checked in the tests; NaNs stay
// NaN).
inline float half_to_float(uint16_t h) {
  const uint32_t w = static_cast<uint32_t>(h) << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  // Normal numbers, Inf and NaN: exponent and mantissa moved to float position; adding 224 << 23
  // and scaling by 2^-112 rebiases the exponent from 15 to 127 (Inf/NaN stay Inf/NaN).
  uint32_t bits = (two_w >> 4) + (0xE0u << 23);
  float normalized;
  std::memcpy(&normalized, &bits, 4);
  normalized *= 0x1.0p-112f;
  bits = (two_w >> 17) | (126u << 23);  // subnormals: 0.5 + mantissa * 2^-24, minus 0.5
  float denormalized;
  std::memcpy(&denormalized, &bits, 4);
  denormalized -= 0.5f;
  uint32_t nb, db;
  std::memcpy(&nb, &normalized, 4);
  std::memcpy(&db, &denormalized, 4);
  const uint32_t use_denormal = 0u - static_cast<uint32_t>(two_w < (1u << 27));  // all ones or zero
  const uint32_t out = sign | (db & use_denormal) | (nb & ~use_denormal);
  float f;
  std::memcpy(&f, &out, 4);
  return f;
}

inline float load_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return half_to_float(h);
}

inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes of Q4_K / Q5_K.
inline void scale_min_k4(int j, const uint8_t* s, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

void deq_f32(const uint8_t* src, float* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * 4);
}

void deq_f16(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = load_f16(src + 2 * i);
}

void deq_bf16(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    dst[i] = bf16_to_f32(h);
  }
}

void deq_q8_0(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 34, dst += 32) {
    const float d = load_f16(src);
    const int8_t* q = reinterpret_cast<const int8_t*>(src + 2);
    for (int j = 0; j < 32; ++j) dst[j] = static_cast<float>(q[j]) * d;
  }
}

void deq_q4_0(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 18, dst += 32) {
    const float d = load_f16(src);
    const uint8_t* qs = src + 2;
    for (int j = 0; j < 16; ++j) {
      dst[j] = static_cast<float>((qs[j] & 0x0F) - 8) * d;
      dst[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
    }
  }
}

void deq_q4_1(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 20, dst += 32) {
    const float d = load_f16(src);
    const float m = load_f16(src + 2);
    const uint8_t* qs = src + 4;
    for (int j = 0; j < 16; ++j) {
      dst[j] = static_cast<float>(qs[j] & 0x0F) * d + m;
      dst[j + 16] = static_cast<float>(qs[j] >> 4) * d + m;
    }
  }
}

void deq_q5_0(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 22, dst += 32) {
    const float d = load_f16(src);
    const uint32_t qh = load_u32(src + 2);
    const uint8_t* qs = src + 6;
    for (int j = 0; j < 16; ++j) {
      const int h0 = static_cast<int>((qh >> j) & 1u) << 4;
      const int h1 = static_cast<int>((qh >> (j + 16)) & 1u) << 4;
      dst[j] = static_cast<float>(((qs[j] & 0x0F) | h0) - 16) * d;
      dst[j + 16] = static_cast<float>(((qs[j] >> 4) | h1) - 16) * d;
    }
  }
}

void deq_q5_1(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 24, dst += 32) {
    const float d = load_f16(src);
    const float m = load_f16(src + 2);
    const uint32_t qh = load_u32(src + 4);
    const uint8_t* qs = src + 8;
    for (int j = 0; j < 16; ++j) {
      const int h0 = static_cast<int>((qh >> j) & 1u) << 4;
      const int h1 = static_cast<int>((qh >> (j + 16)) & 1u) << 4;
      dst[j] = static_cast<float>((qs[j] & 0x0F) | h0) * d + m;
      dst[j + 16] = static_cast<float>((qs[j] >> 4) | h1) * d + m;
    }
  }
}

void deq_q4_k(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 144) {
    const float d = load_f16(src);
    const float dmin = load_f16(src + 2);
    const uint8_t* scales = src + 4;
    const uint8_t* q = src + 16;
    for (int c = 0; c < 4; ++c, q += 32) {  // 64 weights: sub-blocks 2c (low nibbles), 2c+1 (high)
      int sc, m;
      scale_min_k4(2 * c, scales, &sc, &m);
      const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
      scale_min_k4(2 * c + 1, scales, &sc, &m);
      const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
      for (int l = 0; l < 32; ++l) *dst++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *dst++ = d2 * static_cast<float>(q[l] >> 4) - m2;
    }
  }
}

void deq_q5_k(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 176) {
    const float d = load_f16(src);
    const float dmin = load_f16(src + 2);
    const uint8_t* scales = src + 4;
    const uint8_t* qh = src + 16;
    const uint8_t* ql = src + 48;
    uint8_t u1 = 1, u2 = 2;  // the qh bit of sub-blocks 2c and 2c+1
    for (int c = 0; c < 4;
         ++c, ql += 32, u1 = static_cast<uint8_t>(u1 << 2), u2 = static_cast<uint8_t>(u2 << 2)) {
      int sc, m;
      scale_min_k4(2 * c, scales, &sc, &m);
      const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
      scale_min_k4(2 * c + 1, scales, &sc, &m);
      const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
      for (int l = 0; l < 32; ++l)
        *dst++ = d1 * static_cast<float>((ql[l] & 0xF) + ((qh[l] & u1) ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l)
        *dst++ = d2 * static_cast<float>((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
    }
  }
}

void deq_q6_k(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 210) {
    const uint8_t* ql = src;
    const uint8_t* qh = src + 128;
    const int8_t* sc = reinterpret_cast<const int8_t*>(src + 192);
    const float d = load_f16(src + 208);
    for (int half = 0; half < 2; ++half, ql += 64, qh += 32, sc += 8, dst += 128) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = static_cast<int>((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = static_cast<int>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = static_cast<int>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = static_cast<int>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        dst[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
        dst[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
        dst[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
        dst[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
      }
    }
  }
}

// Q2_K: u8 scales[16] (low nibble: scale, high nibble: min); u8 qs[64]; f16 d, dmin. Two halves of
// 128 weights, each reading qs[32h .. 32h+31] at shifts 0, 2, 4, 6; sub-block j of 16 weights has
// x = (d * sc) * q - (dmin * m).
void deq_q2_k(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 84) {
    const uint8_t* sc = src;
    const uint8_t* q = src + 16;
    const float d = load_f16(src + 80);
    const float dmin = load_f16(src + 82);
    int is = 0;
    for (int half = 0; half < 2; ++half, q += 32) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int part = 0; part < 2; ++part, ++is) {
          const float dl = d * static_cast<float>(sc[is] & 0xF);
          const float ml = dmin * static_cast<float>(sc[is] >> 4);
          for (int l = 0; l < 16; ++l)
            *dst++ = dl * static_cast<float>((q[16 * part + l] >> shift) & 3) - ml;
        }
      }
    }
  }
}

// Q3_K: u8 hmask[32]; u8 qs[64]; u8 scales[12] (sixteen 6-bit scales, offset 32); f16 d. Like
// Q2_K's two bits, plus a third from hmask (bit j of hmask[l] for the j-th shift step of both
// halves); x = (d * (sc - 32)) * (q - (high bit set ? 0 : 4)).
void deq_q3_k(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 110) {
    const uint8_t* hm = src;
    const uint8_t* q = src + 32;
    const uint8_t* s = src + 96;
    const float d = load_f16(src + 108);
    int scales[16];
    for (int j = 0; j < 16; ++j) {
      const int low = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
      const int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
      scales[j] = (low | (high << 4)) - 32;
    }
    int is = 0;
    uint8_t m = 1;
    for (int half = 0; half < 2; ++half, q += 32) {
      for (int shift = 0; shift < 8; shift += 2, m = static_cast<uint8_t>(m << 1)) {
        for (int part = 0; part < 2; ++part, ++is) {
          const float dl = d * static_cast<float>(scales[is]);
          for (int l = 0; l < 16; ++l) {
            const int i = 16 * part + l;
            const int v = ((q[i] >> shift) & 3) - ((hm[i] & m) ? 0 : 4);
            *dst++ = dl * static_cast<float>(v);
          }
        }
      }
    }
  }
}

}  // namespace

bool can_dequantize(DType type) {
  switch (type) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kQ2_K:
    case DType::kQ3_K:
      return true;
    default:
      return false;
  }
}

void dequantize_row(DType type, const void* src_v, float* dst, int64_t n) {
  const uint8_t* src = static_cast<const uint8_t*>(src_v);
  const int64_t bs = dtype_info(type).block_size;
  assert(n % bs == 0);
  const int64_t nb = n / bs;
  switch (type) {
    case DType::kF32:
      deq_f32(src, dst, n);
      return;
    case DType::kF16:
      deq_f16(src, dst, n);
      return;
    case DType::kBF16:
      deq_bf16(src, dst, n);
      return;
    case DType::kQ8_0:
      deq_q8_0(src, dst, nb);
      return;
    case DType::kQ4_0:
      deq_q4_0(src, dst, nb);
      return;
    case DType::kQ4_1:
      deq_q4_1(src, dst, nb);
      return;
    case DType::kQ5_0:
      deq_q5_0(src, dst, nb);
      return;
    case DType::kQ5_1:
      deq_q5_1(src, dst, nb);
      return;
    case DType::kQ4_K:
      deq_q4_k(src, dst, nb);
      return;
    case DType::kQ5_K:
      deq_q5_k(src, dst, nb);
      return;
    case DType::kQ6_K:
      deq_q6_k(src, dst, nb);
      return;
    case DType::kQ2_K:
      deq_q2_k(src, dst, nb);
      return;
    case DType::kQ3_K:
      deq_q3_k(src, dst, nb);
      return;
    default:
      assert(false && "dequantize_row: unsupported type");
      return;
  }
}

void dequantize_rows(const TensorView& t, int64_t row_begin, int64_t row_end, float* dst) {
  const int64_t k = t.row_elems();
  for (int64_t r = row_begin; r < row_end; ++r)
    dequantize_row(t.dtype, t.row_ptr(r), dst + (r - row_begin) * k, k);
}

Status dequantize_tensor(const TensorView& t, float* dst) {
  if (!can_dequantize(t.dtype))
    return unsupported("cannot dequantize a tensor of type " + std::string(dtype_name(t.dtype)));
  if (t.memory != MemoryKind::kHost)
    return invalid_argument("dequantize_tensor needs a host tensor");
  const int64_t k = t.row_elems();
  // About 64K elements per chunk keeps the per-task overhead negligible.
  const int64_t min_rows = k > 0 ? std::max<int64_t>(1, 65536 / k) : 1;
  ThreadPool::global().parallel_for(
      t.rows(), [&](int64_t b, int64_t e) { dequantize_rows(t, b, e, dst + b * k); }, min_rows);
  return Status();
}

}  // namespace lathe
