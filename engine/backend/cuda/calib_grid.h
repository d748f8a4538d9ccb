// The integer grid of int_quant.h (int_grid_params, int_code, int_value, round_scale_to) as
// functions that compile for both the host and the device, so that the GPTQ kernel (calib_gptq.cu)
// picks the same scales, zero points and codes as the CPU. Every float operation is the CPU's, in
// its order, with IEEE round-to-nearest (nvcc's defaults: no fast math; no operation here can be
// contracted into an FMA). test_cuda_calib_plan checks the host build of these against
// int_quant.h bit for bit; the device build is the same source.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define LATHE_CALIB_HD __host__ __device__ __forceinline__
#else
#define LATHE_CALIB_HD inline
#endif

namespace lathe::cuda {

// IntQuantConfig's fields the grid reads, as plain values a kernel can take.
struct CalibGrid {
  int32_t bits = 4;
  int32_t symmetric = 1;
  int32_t scale_kind = 0;  // 0: f32, 1: f16, 2: bf16 (IntQuantConfig::scale_dtype)
  int32_t min_zero = 0;
};

struct CalibGroupParams {
  float scale = 1.f;
  int32_t zero = 0;
};

LATHE_CALIB_HD uint32_t calib_float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

LATHE_CALIB_HD float calib_bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

// lathe::f32_to_bf16 then bf16_to_f32 (engine/core/half.h).
LATHE_CALIB_HD float calib_round_bf16(float f) {
  uint32_t u = calib_float_bits(f);
  uint32_t h;
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    h = (u >> 16) | 0x40u;
  } else {
    u += 0x7fffu + ((u >> 16) & 1u);
    h = u >> 16;
  }
  return calib_bits_float((h & 0xffffu) << 16);
}

// lathe::f32_to_f16 then f16_to_f32 (engine/core/half.h).
LATHE_CALIB_HD float calib_round_f16(float f) {
  const uint32_t u = calib_float_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t abs = u & 0x7fffffffu;
  uint32_t h;
  if (abs > 0x7f800000u) {
    h = sign | 0x7e00u;
  } else if (abs >= 0x477ff000u) {
    h = sign | 0x7c00u;
  } else if (abs < 0x38800000u) {
    if (abs < 0x33000000u) {
      h = sign;
    } else {
      const uint32_t e = abs >> 23;
      const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
      const uint32_t shift = 126 - e;
      uint32_t half_mant = mant >> shift;
      const uint32_t rem = mant & ((1u << shift) - 1);
      const uint32_t halfway = 1u << (shift - 1);
      if (rem > halfway || (rem == halfway && (half_mant & 1u))) ++half_mant;
      h = sign | half_mant;
    }
  } else {
    h = (abs - 0x38000000u) >> 13;
    const uint32_t rem = abs & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
    h |= sign;
  }
  // Back to float32.
  const uint32_t hs = (h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t out;
  if (exp == 0) {
    if (mant == 0) {
      out = hs;
    } else {
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      out = hs | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant & 0x3ffu) << 13;
    }
  } else if (exp == 31) {
    out = hs | 0x7f800000u | mant << 13;
  } else {
    out = hs | (exp + 127 - 15) << 23 | mant << 13;
  }
  return calib_bits_float(out);
}

// round_scale_to (int_quant.cpp).
LATHE_CALIB_HD float calib_round_scale(float scale, int32_t kind) {
  float r = scale;
  if (kind == 1) {
    r = calib_round_f16(scale);
    if (!(r > 0.f)) r = calib_bits_float(0x33800000u);  // 2^-24, the smallest f16 subnormal
#if defined(__CUDA_ARCH__)
    if (isinf(r)) r = 65504.f;
#else
    if (std::isinf(r)) r = 65504.f;
#endif
  } else if (kind == 2) {
    r = calib_round_bf16(scale);
    if (!(r > 0.f)) r = calib_bits_float(0x00010000u);  // bf16 bits 0x0001
  }
  return r;
}

// int_grid_params (int_quant.cpp); std::min / std::max / std::clamp written out with their exact
// comparisons.
LATHE_CALIB_HD CalibGroupParams calib_grid_params(float lo, float hi, const CalibGrid& c) {
  const int32_t max_code = (1 << c.bits) - 1;
  lo = (0.f < lo) ? 0.f : lo;  // std::min(lo, 0.f)
  hi = (hi < 0.f) ? 0.f : hi;  // std::max(hi, 0.f)
  if (c.symmetric) {
    const float a_lo = fabsf(lo);
    const float a = (a_lo < hi) ? hi : a_lo;  // std::max(|lo|, hi)
    lo = -a;
    hi = a;
  }
  if (lo == 0.f && hi == 0.f) {
    lo = -1.f;
    hi = 1.f;
  }
  CalibGroupParams p;
  p.scale = calib_round_scale((hi - lo) / static_cast<float>(max_code), c.scale_kind);
  if (c.symmetric) {
    p.zero = 1 << (c.bits - 1);
  } else {
    const float z = rintf(-lo / p.scale);
    const float zlo = static_cast<float>(c.min_zero), zhi = static_cast<float>(max_code);
    const float zc = (z < zlo) ? zlo : ((zhi < z) ? zhi : z);  // std::clamp
    p.zero = static_cast<int32_t>(zc);
  }
  return p;
}

// int_code (int_quant.h): round half to even of w / scale, plus the zero point, clamped.
LATHE_CALIB_HD int32_t calib_code(float w, const CalibGroupParams& p, int32_t max_code) {
  const float r = rintf(w / p.scale);
  const float q = r + static_cast<float>(p.zero);
  if (!(q > 0.f)) return 0;
  if (q > static_cast<float>(max_code)) return max_code;
  return static_cast<int32_t>(q);
}

// int_value (int_quant.h).
LATHE_CALIB_HD float calib_value(int32_t q, const CalibGroupParams& p) {
  return p.scale * static_cast<float>(q - p.zero);
}

}  // namespace lathe::cuda
