// Device-side decoding of 32 consecutive weights (chunk c) of one row of a GGUF Q4_1 / Q5_0 / Q5_1
// / Q2_K / Q3_K part in the unit layout (gguf_units.h), weight by weight, in float32 as the CPU
// reference dequantizes the file's blocks (engine/model/dequant.cpp; quant_decode.cuh's
// decode_gguf). The generic kernels (the one-row decode kernel, the dequantize path of prefill)
// read the layout through this; the k-quant decode kernel has its own vectorized reading of it.
// Included by quant_decode.cuh only.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

#include "engine/backend/cuda/quant_dispatch.h"
#include "engine/backend/cuda/quant_linear.h"

namespace lathe::cuda::quant {

// The float of f16 bits (the low 16 of `bits`), on the device and on the host (the unit decoding
// and the k-quant kernel's arithmetic also run on the host: quant_kquants_host.cu).
__host__ __device__ __forceinline__ float f16_bits_to_float(uint32_t bits) {
#ifdef __CUDA_ARCH__
  return __half2float(__ushort_as_half(static_cast<unsigned short>(bits)));
#else
  const uint32_t h = bits & 0xFFFFu, sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu,
                 f = h & 0x3FFu;
  if (e == 0) {  // zero or subnormal: f * 2^-24
    const float v = static_cast<float>(f) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  const uint32_t u = sign | (e == 31 ? 0x7F800000u | (f << 13) : ((e + 112) << 23) | (f << 13));
  float out;
  std::memcpy(&out, &u, 4);
  return out;
#endif
}

__host__ __device__ __forceinline__ float units_f16(const uint8_t* p) {
  return f16_bits_to_float(static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8);
}

template <int K>
__host__ __device__ __forceinline__ void decode_gguf_units(const QuantPart& p, int64_t row,
                                                           int64_t c, float (&w)[32]) {
  const uint8_t* data = static_cast<const uint8_t*>(p.data);
  const uint8_t* scales = static_cast<const uint8_t*>(p.scales);
  const uint8_t* aux = static_cast<const uint8_t*>(p.gguf_aux);
  if constexpr (K == kQ4_1 || K == kQ5_0 || K == kQ5_1) {
    // Block b = chunk c of the row: qs (16 bytes; byte j: weight j low, j + 16 high), d (and m),
    // Q5: qh' (the high bit of weight 4 i + e + 16 s at bit 8 e + 2 i + s).
    const int64_t b = row * (p.k / 32) + c;
    const uint8_t* qs = data + 16 * b;
    const float d = K == kQ5_0 ? units_f16(scales + 2 * b) : units_f16(scales + 4 * b);
    const float m = K == kQ5_0 ? 0.0f : units_f16(scales + 4 * b + 2);
    const uint32_t qh = K == kQ4_1 ? 0u : *reinterpret_cast<const uint32_t*>(aux + 4 * b);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        int v = s ? qs[j] >> 4 : qs[j] & 0x0F;
        if constexpr (K != kQ4_1)
          v |= static_cast<int>((qh >> (8 * (j % 4) + 2 * (j / 4) + s)) & 1u) << 4;
        if constexpr (K == kQ5_0)
          w[j + 16 * s] = static_cast<float>(v - 16) * d;
        else
          w[j + 16 * s] = static_cast<float>(v) * d + m;
      }
    }
  } else if constexpr (K == kQ2K || K == kQ3K) {
    // Block b holds chunk c; weight t (0..255) of the block is in unit t / 64 at s = (t % 64) / 16,
    // word i = (t % 16) / 4, byte e = t % 4 (qs': bits 2 s of byte 16 unit + 4 i + e).
    const int64_t b = row * (p.k / 256) + c / 8;
    const int t0 = static_cast<int>(c % 8) * 32;
    if constexpr (K == kQ2K) {
      const uint8_t* blk = data + 80 * b;  // scales[16] (scale | min << 4 per 16 weights), qs'
      const float d = units_f16(scales + 4 * b), dmin = units_f16(scales + 4 * b + 2);
#pragma unroll
      for (int l = 0; l < 32; ++l) {
        const int t = t0 + l, u = t / 64, s = (t % 64) / 16, i = (t % 16) / 4, e = t % 4;
        const int sc = blk[t / 16];
        const float dl = d * static_cast<float>(sc & 0xF), ml = dmin * static_cast<float>(sc >> 4);
        const int q = (blk[16 + 16 * u + 4 * i + e] >> (2 * s)) & 3;
        w[l] = dl * static_cast<float>(q) - ml;
      }
    } else {
      const uint8_t* blk = data + 96 * b;  // hmask' (32), qs' (64)
      const uint8_t* sc = aux + 12 * b;    // the file's 12 bytes of 6-bit scales
      const float d = units_f16(scales + 2 * b);
#pragma unroll
      for (int l = 0; l < 32; ++l) {
        const int t = t0 + l, u = t / 64, s = (t % 64) / 16, i = (t % 16) / 4, e = t % 4;
        const int j = t / 16;
        const int low = (sc[j % 8] >> (4 * (j / 8))) & 0xF;
        const int high = (sc[8 + j % 4] >> (2 * (j / 4))) & 3;
        const float dl = d * static_cast<float>((low | (high << 4)) - 32);
        const int hbit = (blk[8 * u + 4 * (s / 2) + e] >> (4 * (s % 2) + i)) & 1;
        const int q = ((blk[32 + 16 * u + 4 * i + e] >> (2 * s)) & 3) - (hbit ? 0 : 4);
        w[l] = dl * static_cast<float>(q);
      }
    }
  }
}

}  // namespace lathe::cuda::quant
