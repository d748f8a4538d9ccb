// The K-quant super-block quantizers of ggml_quantize.h: q4_k, q5_k, q6_k (256 weights per block).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/core/half.h"
#include "engine/quant/ggml_quantize.h"

namespace lathe {
namespace {

constexpr int kQkK = 256;
constexpr float kGroupMaxEps = 1e-15f;

// Round to nearest (ties to even) for |x| <= 2^22, by adding 1.5 * 2^23 and reading the mantissa,
// exactly as ggml does it.
inline int nearest_int(float x) {
  const float v = x + 12582912.f;
  int i;
  std::memcpy(&i, &v, sizeof(int));
  return (i & 0x007fffff) - 0x00400000;
}

inline float load_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}
inline void store_f16(uint8_t* p, float v) {
  const uint16_t h = f32_to_f16(v);
  std::memcpy(p, &h, 2);
}

// Scale and min (returned as -min) of n values for codes 0..nmax, minimising the weighted squared
// error: start from the min/max grid, then try inverse scales (nmax + rmin + rdelta * is) / range
// for is = 0..nstep, each refit by weighted least squares of x ~ scale * l + min.
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                       float* the_min, uint8_t* Laux, float rmin, float rdelta, int nstep) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.f;
  }
  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    float diff = scale * L[i] + min - x[i];
    diff = diff * diff;
    best_error += weights[i] * diff;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * (x[i] - min));
      l = std::max(0, std::min(nmax, l));
      Laux[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      sum_l += w * l;
      sum_l2 += w * l * l;
      sum_xl += w * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * Laux[i] + this_min - x[i];
        diff = diff * diff;
        cur_error += weights[i] * diff;
      }
      if (cur_error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = Laux[i];
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

// Symmetric scale of n values for signed codes -nmax..nmax-1 (stored as l + nmax), weights x^2:
// the max-magnitude grid, refit by least squares, then 18 neighbouring inverse scales.
float make_qx_quants(int n, int nmax, const float* x, int8_t* L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  float iscale = -nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = nearest_int(iscale * x[i]);
    l = std::max(-nmax, std::min(nmax - 1, l));
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 != 0.f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * x[i]);
      l = std::max(-nmax, std::min(nmax - 1, l));
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        const int l = nearest_int(iscale * x[i]);
        L[i] = static_cast<int8_t>(nmax + std::max(-nmax, std::min(nmax - 1, l)));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// 6-bit scale and min of sub-block j from the 12 packed scale bytes of q4_k / q5_k.
inline void get_scale_min_k4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
  }
}

// The common part of q4_k and q5_k: eight 32-weight sub-blocks get a scale and a min from
// make_qkx2_quants, quantized to 6 bits against the block's largest; then every weight is
// requantized with the stored (rounded) values. Writes d, dmin (f16) and the 12 scale bytes to
// `head` (16 bytes) and the final codes to L[256].
void quantize_k4_head(const float* x, int nmax, float rmin, int nstep, uint8_t* head, uint8_t* L) {
  uint8_t Laux[32];
  float weights[32];
  float mins[kQkK / 32];
  float scales[kQkK / 32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < kQkK / 32; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin,
                                 0.1f, nstep);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  uint8_t* sc = head + 4;
  std::memset(sc, 0, 12);
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  for (int j = 0; j < kQkK / 32; ++j) {
    uint8_t ls = static_cast<uint8_t>(nearest_int(inv_scale * scales[j]));
    uint8_t lm = static_cast<uint8_t>(nearest_int(inv_min * mins[j]));
    ls = std::min<uint8_t>(63, ls);
    lm = std::min<uint8_t>(63, lm);
    if (j < 4) {
      sc[j] = ls;
      sc[j + 4] = lm;
    } else {
      sc[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
      sc[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      sc[j - 0] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  store_f16(head, max_scale / 63.f);
  store_f16(head + 2, max_min / 63.f);
  for (int j = 0; j < kQkK / 32; ++j) {
    uint8_t s, m;
    get_scale_min_k4(j, sc, &s, &m);
    const float d = load_f16(head) * s;
    if (d == 0.f) continue;
    const float dm = load_f16(head + 2) * m;
    for (int ii = 0; ii < 32; ++ii) {
      const int l = nearest_int((x[32 * j + ii] + dm) / d);
      L[32 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    }
  }
}

}  // namespace

// Block: f16 d, dmin; u8 scales[12]; u8 qs[128] (chunk c: sub-block 2c low, 2c+1 high nibbles).
void quantize_row_q4_k(const float* x, uint8_t* y, int64_t n) {
  uint8_t L[kQkK];
  for (int64_t b = 0; b < n / kQkK; ++b, x += kQkK, y += 144) {
    quantize_k4_head(x, 15, -1.f, 20, y, L);
    uint8_t* q = y + 16;
    for (int j = 0; j < kQkK; j += 64, q += 32)
      for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
  }
}

// Block: f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]. Bit 2c (2c+1) of qh[l] is the fifth
// bit of weight l of sub-block 2c (2c+1).
void quantize_row_q5_k(const float* x, uint8_t* y, int64_t n) {
  uint8_t L[kQkK];
  for (int64_t b = 0; b < n / kQkK; ++b, x += kQkK, y += 176) {
    quantize_k4_head(x, 31, -0.5f, 15, y, L);
    uint8_t* qh = y + 16;
    uint8_t* ql = y + 48;
    std::memset(qh, 0, 32);
    uint8_t m1 = 1, m2 = 2;
    for (int base = 0; base < kQkK; base += 64, ql += 32) {
      for (int j = 0; j < 32; ++j) {
        int l1 = L[base + j];
        if (l1 > 15) {
          l1 -= 16;
          qh[j] |= m1;
        }
        int l2 = L[base + j + 32];
        if (l2 > 15) {
          l2 -= 16;
          qh[j] |= m2;
        }
        ql[j] = static_cast<uint8_t>(l1 | (l2 << 4));
      }
      m1 = static_cast<uint8_t>(m1 << 2);
      m2 = static_cast<uint8_t>(m2 << 2);
    }
  }
}

// Block: u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d.
void quantize_row_q6_k(const float* x, uint8_t* y, int64_t n) {
  int8_t L[kQkK];
  float scales[kQkK / 16];
  for (int64_t b = 0; b < n / kQkK; ++b, x += kQkK, y += 210) {
    uint8_t* ql = y;
    uint8_t* qh = y + 128;
    int8_t* sc = reinterpret_cast<int8_t*>(y + 192);
    uint8_t* d_ptr = y + 208;
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < kQkK / 16; ++ib) {
      const float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib);
      scales[ib] = scale;
      const float abs_scale = std::fabs(scale);
      if (abs_scale > max_abs_scale) {
        max_abs_scale = abs_scale;
        max_scale = scale;
      }
    }
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(y, 0, 210);
      store_f16(d_ptr, 0.f);
      continue;
    }
    const float iscale = -128.f / max_scale;
    store_f16(d_ptr, 1 / iscale);
    for (int ib = 0; ib < kQkK / 16; ++ib)
      sc[ib] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
    for (int j = 0; j < kQkK / 16; ++j) {
      const float d = load_f16(d_ptr) * sc[j];
      if (d == 0.f) continue;
      for (int ii = 0; ii < 16; ++ii) {
        int l = nearest_int(x[16 * j + ii] / d);
        l = std::max(-32, std::min(31, l));
        L[16 * j + ii] = static_cast<int8_t>(l + 32);
      }
    }
    for (int j = 0; j < kQkK; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t q1 = L[j + l + 0] & 0xF;
        const uint8_t q2 = L[j + l + 32] & 0xF;
        const uint8_t q3 = L[j + l + 64] & 0xF;
        const uint8_t q4 = L[j + l + 96] & 0xF;
        ql[l + 0] = static_cast<uint8_t>(q1 | (q3 << 4));
        ql[l + 32] = static_cast<uint8_t>(q2 | (q4 << 4));
        qh[l] = static_cast<uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                                     ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
      }
    }
  }
}

}  // namespace lathe
