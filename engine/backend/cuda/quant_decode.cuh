// Device-side decoding of 32 consecutive weights of one row of a QuantPart (quant_linear.h), per
// storage kind, in float32 exactly as the CPU reference dequantizes them (engine/model/dequant.cpp
// for the GGUF types). Chunk c of a row holds inputs [32 c, 32 c + 32). Included by the quantized
// linear .cu files only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "engine/backend/cuda/int4_tiles.h"
#include "engine/backend/cuda/kernel_utils.cuh"
#include "engine/backend/cuda/quant_decode_units.cuh"
#include "engine/backend/cuda/quant_dispatch.h"
#include "engine/backend/cuda/quant_linear.h"

namespace lathe::cuda::quant {

__device__ __forceinline__ float f16_at(const uint8_t* p) {
  return __half2float(*reinterpret_cast<const __half*>(p));
}

// 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes of Q4_K / Q5_K.
__device__ __forceinline__ void scale_min_k4(int j, const uint8_t* s, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

template <int K>
struct GgufBlock;
template <>
struct GgufBlock<kQ8_0> {
  static constexpr int kSize = 32, kBytes = 34;
};
template <>
struct GgufBlock<kQ4_0> {
  static constexpr int kSize = 32, kBytes = 18;
};
template <>
struct GgufBlock<kQ4_1> {
  static constexpr int kSize = 32, kBytes = 20;
};
template <>
struct GgufBlock<kQ5_0> {
  static constexpr int kSize = 32, kBytes = 22;
};
template <>
struct GgufBlock<kQ5_1> {
  static constexpr int kSize = 32, kBytes = 24;
};
template <>
struct GgufBlock<kQ2K> {
  static constexpr int kSize = 256, kBytes = 84;
};
template <>
struct GgufBlock<kQ3K> {
  static constexpr int kSize = 256, kBytes = 110;
};
template <>
struct GgufBlock<kQ4K> {
  static constexpr int kSize = 256, kBytes = 144;
};
template <>
struct GgufBlock<kQ5K> {
  static constexpr int kSize = 256, kBytes = 176;
};
template <>
struct GgufBlock<kQ6K> {
  static constexpr int kSize = 256, kBytes = 210;
};

// GGUF: `blk` is the block holding the chunk, `sub` the chunk's index inside it (0 for 32-weight
// blocks, 0..7 for the k-quants). Reads only the block's own bytes.
// d6: Q6_K's d (at blk + 208 in a file's block; elsewhere in the split layout, gguf_repack.h).
// q5_units: Q5_K's high bits in unit order (gguf_repack.h).
template <int K>
__device__ __forceinline__ void decode_gguf(const uint8_t* blk, int sub, float (&w)[32],
                                            const uint8_t* d6 = nullptr, bool q5_units = false) {
  if constexpr (K == kQ8_0) {
    const float d = f16_at(blk);
    const int8_t* q = reinterpret_cast<const int8_t*>(blk + 2);
#pragma unroll
    for (int j = 0; j < 32; ++j) w[j] = static_cast<float>(q[j]) * d;
  } else if constexpr (K == kQ4_0 || K == kQ4_1) {
    const float d = f16_at(blk);
    const float m = K == kQ4_1 ? f16_at(blk + 2) : 0.0f;
    const uint8_t* qs = blk + (K == kQ4_1 ? 4 : 2);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      if constexpr (K == kQ4_0) {
        w[j] = static_cast<float>((qs[j] & 0x0F) - 8) * d;
        w[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
      } else {
        w[j] = static_cast<float>(qs[j] & 0x0F) * d + m;
        w[j + 16] = static_cast<float>(qs[j] >> 4) * d + m;
      }
    }
  } else if constexpr (K == kQ5_0 || K == kQ5_1) {
    const float d = f16_at(blk);
    const float m = K == kQ5_1 ? f16_at(blk + 2) : 0.0f;
    const uint8_t* h = blk + (K == kQ5_1 ? 4 : 2);
    const uint32_t qh = static_cast<uint32_t>(h[0]) | (static_cast<uint32_t>(h[1]) << 8) |
                        (static_cast<uint32_t>(h[2]) << 16) | (static_cast<uint32_t>(h[3]) << 24);
    const uint8_t* qs = h + 4;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const int h0 = static_cast<int>((qh >> j) & 1u) << 4;
      const int h1 = static_cast<int>((qh >> (j + 16)) & 1u) << 4;
      if constexpr (K == kQ5_0) {
        w[j] = static_cast<float>(((qs[j] & 0x0F) | h0) - 16) * d;
        w[j + 16] = static_cast<float>(((qs[j] >> 4) | h1) - 16) * d;
      } else {
        w[j] = static_cast<float>((qs[j] & 0x0F) | h0) * d + m;
        w[j + 16] = static_cast<float>((qs[j] >> 4) | h1) * d + m;
      }
    }
  } else if constexpr (K == kQ4K || K == kQ5K) {
    const float d = f16_at(blk);
    const float dmin = f16_at(blk + 2);
    int sc, mn;
    scale_min_k4(sub, blk + 4, &sc, &mn);
    const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(mn);
    const uint8_t* q = blk + (K == kQ4K ? 16 : 48) + 32 * (sub >> 1);
    const int shift = (sub & 1) * 4;
#pragma unroll
    for (int l = 0; l < 32; ++l) {
      int v = (q[l] >> shift) & 0xF;
      if constexpr (K == kQ5K) {
        // Unit order: weight l's bits of unit sub / 2 are in byte l % 8, pair 2 (l / 16) +
        // (l / 8) % 2 ... at bit 2 pair + sub % 2 (q5k_qh_to_units).
        const int bit = q5_units ? (blk[16 + 8 * (sub >> 1) + (l & 7)] >>
                                    ((sub & 1) + 4 * ((l >> 3) & 1) + 2 * (l >> 4))) &
                                       1
                                 : (blk[16 + l] >> sub) & 1;
        v += bit ? 16 : 0;
      }
      w[l] = d1 * static_cast<float>(v) - m1;
    }
  } else if constexpr (K == kQ2K) {
    // u8 scales[16]; u8 qs[64]; f16 d, dmin. Chunk sub = 4 h + j is qs[32 h .. 32 h + 31] at bits
    // 2 j; its two 16-weight halves take scale bytes 2 sub and 2 sub + 1 (low nibble: scale, high
    // nibble: min): x = (d * sc) * q - (dmin * m).
    const uint8_t* q = blk + 16 + 32 * (sub >> 2);
    const int shift = 2 * (sub & 3);
    const float d = f16_at(blk + 80), dmin = f16_at(blk + 82);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int sc = blk[2 * sub + h];
      const float dl = d * static_cast<float>(sc & 0xF), ml = dmin * static_cast<float>(sc >> 4);
#pragma unroll
      for (int l = 0; l < 16; ++l)
        w[16 * h + l] = dl * static_cast<float>((q[16 * h + l] >> shift) & 3) - ml;
    }
  } else if constexpr (K == kQ3K) {
    // u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d. Q2_K's two bits (qs at offset 32) plus bit
    // `sub` of hmask[l] (clear: minus 4); sixteen 6-bit scales j, offset 32: low 4 bits from
    // nibble j / 8 of byte j % 8, high 2 bits from bits 2 (j / 4) of byte 8 + j % 4.
    // x = (d * (sc - 32)) * (q - (high bit set ? 0 : 4)).
    const uint8_t* q = blk + 32 + 32 * (sub >> 2);
    const uint8_t* s = blk + 96;
    const int shift = 2 * (sub & 3);
    const float d = f16_at(blk + 108);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int j = 2 * sub + h;
      const int low = (s[j % 8] >> (4 * (j / 8))) & 0xF;
      const int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
      const float dl = d * static_cast<float>((low | (high << 4)) - 32);
#pragma unroll
      for (int l = 0; l < 16; ++l) {
        const int i = 16 * h + l;
        const int v = ((q[i] >> shift) & 3) - (((blk[i] >> sub) & 1) ? 0 : 4);
        w[i] = dl * static_cast<float>(v);
      }
    }
  } else if constexpr (K == kQ6K) {
    const int half = sub >> 2, g = sub & 3;
    const uint8_t* ql = blk + 64 * half;
    const uint8_t* qh = blk + 128 + 32 * half;
    const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192) + 8 * half;
    const float d = f16_at(d6 != nullptr ? d6 : blk + 208);
    const int lo_off = 32 * (g & 1), lo_shift = 4 * (g >> 1), hi_shift = 2 * g;
#pragma unroll
    for (int l = 0; l < 32; ++l) {
      const int q = static_cast<int>(((ql[l + lo_off] >> lo_shift) & 0xF) |
                                     (((qh[l] >> hi_shift) & 3) << 4)) -
                    32;
      w[l] = d * static_cast<float>(sc[l / 16 + 2 * g]) * static_cast<float>(q);
    }
  }
}

// e4m3 (the OCP "fn" variant: no infinities, S.1111.111 is NaN) to float.
__device__ __forceinline__ float e4m3_to_float(uint8_t v) {
  const uint32_t sign = (v & 0x80u) << 24;
  const uint32_t exp = (v >> 3) & 0xFu, mant = v & 0x7u;
  float f;
  if (exp == 0) {
    f = static_cast<float>(mant) * 0.001953125f;  // mant / 8 * 2^-6
  } else if (exp == 15 && mant == 7) {
    f = __int_as_float(0x7FC00000);
  } else {
    f = __int_as_float(static_cast<int>(((exp + 120u) << 23) | (mant << 20)));
  }
  return __int_as_float(__float_as_int(f) | static_cast<int>(sign));
}

// The 32 weights of chunk c of row `row` of part p (row relative to the part).
template <int K, typename T>
__device__ __forceinline__ void decode_chunk(const QuantPart& p, int64_t row, int64_t c,
                                             float (&w)[32]) {
  if constexpr (K == kQ4_1 || K == kQ5_0 || K == kQ5_1 || K == kQ2K || K == kQ3K) {
    if (p.gguf_units) {  // the unit layout (gguf_units.h)
      decode_gguf_units<K>(p, row, c, w);
      return;
    }
  }
  if constexpr (K <= kQ6K) {
    using B = GgufBlock<K>;
    const bool split = K == kQ6K && p.gguf_q6k_split;  // 208-byte slots, d apart
    const int64_t slot = split ? 208 : B::kBytes;
    const int64_t e = c * 32;
    const int64_t b = row * (p.k / B::kSize) + e / B::kSize;
    const uint8_t* blk = static_cast<const uint8_t*>(p.data) + b * slot;
    const uint8_t* d6 =
        split ? reinterpret_cast<const uint8_t*>(static_cast<const __half*>(p.scales) + b)
              : nullptr;
    decode_gguf<K>(blk, static_cast<int>((e % B::kSize) / 32), w, d6, p.gguf_q5k_units);
  } else if constexpr (K == kInt4 || K == kInt8) {
    constexpr int kBits = K == kInt4 ? 4 : 8, kPer = 32 / kBits, kWords = 32 / kPer;
    const int64_t words_per_row = p.k / kPer;
    const uint32_t* words = static_cast<const uint32_t*>(p.data) + row * words_per_row + c * kWords;
    const int64_t groups = p.k / p.group_size;
    const bool f32_scales = p.scale_dtype == DType::kF32;
    auto scale = [&](int64_t g) {
      return f32_scales ? static_cast<const float*>(p.scales)[row * groups + g]
                        : __half2float(static_cast<const __half*>(p.scales)[row * groups + g]);
    };
    const uint8_t* zeros = p.zeros != nullptr ? p.zeros + row * groups : nullptr;
    constexpr float kMid = static_cast<float>(1 << (kBits - 1));
    if (kBits == 4 && p.int4_tiles) {
      // int4_tiles.h: chunk c is half h of the 64-input chunk c / 2; its inputs 16 i + 4 kb + e
      // (i = 0, 1) are in lanes 4 (row % 8) + 2 h + i of the chunk, word kb, nibble
      // upper + 2 (e / 2) + 4 (e % 2): two adjacent 16-byte groups.
      const int h = static_cast<int>(c % 2);
      const uint4* at = static_cast<const uint4*>(p.data) +
                        ((row / kInt4TileRows) * (p.k / kInt4TileK) + c / 2) * 32 + 4 * (row % 8) +
                        2 * h;
      const uint4 lo = at[0], hi = at[1];
      const uint32_t ws[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
      const int upper = static_cast<int>((row % 16) / 8);
      const int64_t g = c * 32 / p.group_size;
      const float s = scale(g);
      const float z = zeros != nullptr ? static_cast<float>(zeros[g]) : kMid;
#pragma unroll
      for (int i = 0; i < 32; ++i) {
        const int e = i % 4;
        const uint32_t word = ws[(i / 16) * 4 + (i % 16) / 4];
        const int nib = upper + 2 * (e / 2) + 4 * (e % 2);
        w[i] = s * (static_cast<float>((word >> (4 * nib)) & 15u) - z);
      }
    } else if (p.g_idx == nullptr) {
      const int64_t g = c * 32 / p.group_size;
      const float s = scale(g);
      const float z = zeros != nullptr ? static_cast<float>(zeros[g]) : kMid;
#pragma unroll
      for (int wi = 0; wi < kWords; ++wi) {
        const uint32_t word = words[wi];
#pragma unroll
        for (int j = 0; j < kPer; ++j)
          w[wi * kPer + j] =
              s * (static_cast<float>((word >> (j * kBits)) & ((1u << kBits) - 1)) - z);
      }
    } else {
#pragma unroll
      for (int wi = 0; wi < kWords; ++wi) {
        const uint32_t word = words[wi];
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
          const int32_t g = p.g_idx[c * 32 + wi * kPer + j];
          const float z = zeros != nullptr ? static_cast<float>(zeros[g]) : kMid;
          w[wi * kPer + j] =
              scale(g) * (static_cast<float>((word >> (j * kBits)) & ((1u << kBits) - 1)) - z);
        }
      }
    }
  } else if constexpr (K == kFp8) {
    const uint8_t* q = static_cast<const uint8_t*>(p.data) + row * p.k + c * 32;
    const float* sc = static_cast<const float*>(p.scales);
    float s = sc[0];
    if (p.fp8_scale == ScaleGranularity::kChannel) s = sc[row];
    if (p.fp8_scale == ScaleGranularity::kBlock) {
      const int64_t kb = (p.k + 127) / 128;
      s = sc[(row / 128) * kb + (c * 32) / 128];
    }
    const uint4 a = *reinterpret_cast<const uint4*>(q);
    const uint4 b = *reinterpret_cast<const uint4*>(q + 16);
    const uint8_t* qa = reinterpret_cast<const uint8_t*>(&a);
    const uint8_t* qb = reinterpret_cast<const uint8_t*>(&b);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      w[j] = e4m3_to_float(qa[j]) * s;
      w[16 + j] = e4m3_to_float(qb[j]) * s;
    }
  } else {
    const T* r = static_cast<const T*>(p.data) + row * p.k + c * 32;
#pragma unroll
    for (int v = 0; v < 4; ++v) {
      float f[8];
      load8(r + 8 * v, f);
#pragma unroll
      for (int j = 0; j < 8; ++j) w[8 * v + j] = f[j];
    }
  }
}

}  // namespace lathe::cuda::quant
