// The decode-shaped product (M <= kQuantGemvMaxM) for the GGUF block types in their own bytes:
// quant_linear.h's quant_gemv for Q4_K, Q5_K, Q6_K (split), Q4_0 (as 4-bit integer rows of group
// 32, kInt4) and Q4_1, Q5_0, Q5_1, Q2_K, Q3_K (the unit layout of gguf_units.h). Included by the
// quant_linear_kquants*.cu files only.
//
// Shape of the work: a persistent grid (blocks per SM by shared memory, at most 2) of 8 warps; a
// warp's task is kKqRows consecutive output rows, and a lane takes "units" of 64 weights of each
// row: unit u is chunk u % 4 of super-block u / 4 (Q4_K / Q5_K: the 32 code bytes holding
// sub-blocks 2 c and 2 c + 1; Q6_K: half c / 2, positions 16 (c % 2) .. + 15 of its four
// 32-weight quarters; Q2_K / Q3_K: the unit's 16 bytes of qs'), or two 32-weight blocks (kInt4,
// Q4_1, Q5_0, Q5_1). Loads run two (task, step) ahead of the arithmetic, as decode_gemv.cu's
// BF16 kernel does; the first ones are issued before the wait on the previous kernel (PDL).
//
// Arithmetic (the decode is the cost: ~2.5 instructions per weight): a code q (< 128) is placed
// in byte 2 of the float 128.0f by one byte permute, which is the float 128 + q exactly; the lane
// accumulates (128 + q) * x over each scale group in fp32 and the group's sum of activations S
// (precomputed per 16 inputs into shared memory, in a fixed order) removes the offset:
//   Q4_K / Q5_K / Q2_K: w = d1 q - m1   ->  d1 * acc - (128 d1 + m1) * S,
//   Q6_K:        w = d1 (q - 32)        ->  d1 * acc - 160 d1 * S   (Q3_K: q - 4, 132 d1;
//                                           Q4_0: q - 8, 136 d; Q5_0: q - 16, 144 d),
//   Q4_1 / Q5_1: w = d q + m            ->  d * acc - (128 d - m) * S,
// with d1 = d * sc and m1 = dmin * m formed in fp32 as the CPU reference forms them
// (engine/model/dequant.cpp). The offset costs about 4-5 bits of the fp32 sum (128 against codes
// of ~8): relative error ~2e-6, far below the bf16 output's.
// Activations: staged once per block as fp32 in shared memory, with 4 floats of padding after
// every 64 (lanes of a warp read 64-float runs 64 or 256 floats apart: without the padding their
// 16-byte reads fall in one bank group).
// Q6_K's 210-byte blocks are 2-byte aligned only: the upload splits each into a 208-byte slot (ql,
// qh, scales) and its f16 d in a separate array (QuantPart::gguf_q6k_split, gguf_repack.h), so
// that every piece is a 16-byte load and no byte is added.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstring>

#include "engine/backend/cuda/gemv_epilogue.cuh"
#include "engine/backend/cuda/quant_decode.cuh"

namespace lathe::cuda::quant {

constexpr int kKqThreads = 256;
constexpr int kKqWarps = kKqThreads / 32;
constexpr int kKqRows = 2;  // output rows per warp task
constexpr int kKqMaxM = kKquantMaxM;

// The unit arithmetic below (kq_load, kq_unit and their helpers) is __host__ __device__: the host
// runs it in kquant_rows_on_host (quant_kquants_host.cu), which checks the kernel's decoding
// without a GPU. These are the host twins of the device intrinsics it uses.
#define LATHE_KQ_HD __host__ __device__ __forceinline__
template <typename V>
LATHE_KQ_HD V kq_ldg(const V* p) {
#ifdef __CUDA_ARCH__
  return __ldg(p);
#else
  return *p;
#endif
}
// __byte_perm(a, b, s) in its default mode: byte i of the result is byte (s >> 4 i) & 7 of b:a.
LATHE_KQ_HD uint32_t kq_byte_perm(uint32_t a, uint32_t b, uint32_t s) {
#ifdef __CUDA_ARCH__
  return __byte_perm(a, b, s);
#else
  const uint64_t v = (static_cast<uint64_t>(b) << 32) | a;
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i)
    r |= static_cast<uint32_t>((v >> (8 * ((s >> (4 * i)) & 7))) & 0xFFu) << (8 * i);
  return r;
#endif
}
LATHE_KQ_HD float kq_as_float(uint32_t v) {
#ifdef __CUDA_ARCH__
  return __int_as_float(static_cast<int>(v));
#else
  float f;
  std::memcpy(&f, &v, 4);
  return f;
#endif
}

// Padded index of activation i in a staged row, and the staged row's length in floats
// (kquant_smem_bytes: the rows, then their sums of each 16 inputs, M * k / 16 floats).
LATHE_KQ_HD int kq_pad(int i) {
  return i + (i >> 6) * 4;
}
__host__ __device__ constexpr int64_t kq_row_floats(int64_t k) {
  return k + k / 16;
}

// Whether kind K stores 32-weight blocks (a 64-weight unit is two of them): kInt4 and the unit
// layout's Q4_1 / Q5_0 / Q5_1 (gguf_units.h).
template <int K>
__host__ __device__ constexpr bool kq_pairs() {
  return K == kInt4 || K == kQ4_1 || K == kQ5_0 || K == kQ5_1;
}

// Bytes per 256 weights of a row in `data`: Q6_K the split slot; kInt4 (4-bit integer rows, group
// 32, symmetric, f16 scales: GGUF Q4_0 after the upload's repack, gguf_repack.h), Q4_1, Q5_0 and
// Q5_1 (unit layout) the 4-bit codes only; Q2_K and Q3_K the unit layout's slots.
template <int K>
__host__ __device__ constexpr int kq_block_bytes() {
  return K == kQ4K   ? 144
         : K == kQ5K ? 176
         : K == kQ6K ? 208
         : K == kQ2K ? 80
         : K == kQ3K ? 96
                     : 128;
}
// Bytes per 256 weights of a row in `scales` (Q6_K's d, kInt4's and Q5_0's f16 d per 32, Q4_1's and
// Q5_1's (d, m) per 32, Q2_K's (d, dmin), Q3_K's d) and in the unit layout's aux array (Q5_0 and
// Q5_1: qh' per 32; Q3_K: the 12 scale bytes).
template <int K>
__host__ __device__ constexpr int kq_scale_bytes() {
  return K == kQ6K || K == kQ3K     ? 2
         : K == kInt4 || K == kQ5_0 ? 16
         : K == kQ4_1 || K == kQ5_1 ? 32
         : K == kQ2K                ? 4
                                    : 0;
}
template <int K>
__host__ __device__ constexpr int kq_aux_bytes() {
  return K == kQ5_0 || K == kQ5_1 ? 32 : K == kQ3K ? 12 : 0;
}

// One unit's bytes of one row. Q4_K: c = codes, h = header (d, dmin, 12 scale bytes). Q5_K: as
// Q4_K, and e.x, e.y = the unit's 8 bytes of high bits (unit order, gguf_repack.h). Q6_K: c = low
// nibbles (two runs of 16), e = the 16 high-bit bytes, h = the 16 scales, d in dq. kInt4: c =
// codes, dq = the two f16 d. Q4_1 / Q5_0 / Q5_1: c = the two blocks' qs, h.x, h.y = their (d, m)
// (Q5_0: dq = the two d), e.x, e.y = their qh'. Q2_K: c[0] = qs', h.x = the unit's 4 scale bytes,
// dq = (d, dmin). Q3_K: c[0] = qs', e.x, e.y = hmask', h.x, h.y = the scale words at bytes 4 (c %
// 2) and 8, dq = d.
struct KqUnit {
  uint4 c[2];
  uint4 h;
  uint4 e;
  uint32_t dq;
};

// blk: the unit's block (256-weight kinds) or its first block's codes (kq_pairs kinds); sc, ax: the
// unit's scales and aux bytes (kq_load_unit); c: the unit's index in its 256 weights.
template <int K>
LATHE_KQ_HD void kq_load(const uint8_t* blk, const uint8_t* sc, const uint8_t* ax, int c,
                         KqUnit& u) {
  if constexpr (K == kQ4K) {
    u.h = kq_ldg(reinterpret_cast<const uint4*>(blk));
    u.c[0] = kq_ldg(reinterpret_cast<const uint4*>(blk + 16 + 32 * c));
    u.c[1] = kq_ldg(reinterpret_cast<const uint4*>(blk + 32 + 32 * c));
  } else if constexpr (K == kQ5K) {
    // The unit's high bits: 8 bytes in unit order (QuantPart::gguf_q5k_units).
    u.h = kq_ldg(reinterpret_cast<const uint4*>(blk));
    const uint2 e = kq_ldg(reinterpret_cast<const uint2*>(blk + 16 + 8 * c));
    u.e.x = e.x;
    u.e.y = e.y;
    u.c[0] = kq_ldg(reinterpret_cast<const uint4*>(blk + 48 + 32 * c));
    u.c[1] = kq_ldg(reinterpret_cast<const uint4*>(blk + 64 + 32 * c));
  } else if constexpr (kq_pairs<K>()) {
    // Codes of weights 64 c .. 64 c + 63: kInt4 word i: weights 8 i .. 8 i + 7, nibble j = weight
    // 8 i + j; the GGUF qs of two blocks (byte j: weight j low, j + 16 high).
    u.c[0] = kq_ldg(reinterpret_cast<const uint4*>(blk));
    u.c[1] = kq_ldg(reinterpret_cast<const uint4*>(blk + 16));
    if constexpr (K == kInt4 || K == kQ5_0) {
      u.dq = kq_ldg(reinterpret_cast<const unsigned int*>(sc));
    } else {
      const uint2 dm = kq_ldg(reinterpret_cast<const uint2*>(sc));
      u.h.x = dm.x;
      u.h.y = dm.y;
    }
    if constexpr (K == kQ5_0 || K == kQ5_1) {
      const uint2 e = kq_ldg(reinterpret_cast<const uint2*>(ax));
      u.e.x = e.x;
      u.e.y = e.y;
    }
  } else if constexpr (K == kQ2K) {
    u.c[0] = kq_ldg(reinterpret_cast<const uint4*>(blk + 16 + 16 * c));
    u.h.x = kq_ldg(reinterpret_cast<const unsigned int*>(blk + 4 * c));
    u.dq = kq_ldg(reinterpret_cast<const unsigned int*>(sc));
  } else if constexpr (K == kQ3K) {
    const uint2 e = kq_ldg(reinterpret_cast<const uint2*>(blk + 8 * c));
    u.e.x = e.x;
    u.e.y = e.y;
    u.c[0] = kq_ldg(reinterpret_cast<const uint4*>(blk + 32 + 16 * c));
    u.h.x = kq_ldg(reinterpret_cast<const unsigned int*>(ax + 4 * (c & 1)));
    u.h.y = kq_ldg(reinterpret_cast<const unsigned int*>(ax + 8));
    u.dq = kq_ldg(reinterpret_cast<const unsigned short*>(sc));
  } else {
    const int h = c >> 1, l0 = 16 * (c & 1);
    u.c[0] = kq_ldg(reinterpret_cast<const uint4*>(blk + 64 * h + l0));
    u.c[1] = kq_ldg(reinterpret_cast<const uint4*>(blk + 64 * h + 32 + l0));
    u.e = kq_ldg(reinterpret_cast<const uint4*>(blk + 128 + 32 * h + l0));
    u.h = kq_ldg(reinterpret_cast<const uint4*>(blk + 192));
    u.dq = kq_ldg(reinterpret_cast<const unsigned short*>(sc));
  }
}

// x shifted left by n bits (right by -n when n < 0; n a compile-time constant after unrolling).
LATHE_KQ_HD uint32_t kq_shl(uint32_t x, int n) {
  return n >= 0 ? x << n : x >> -n;
}

// The float 128 + (byte e of word w), w's bytes below 128.
LATHE_KQ_HD float kq_code(uint32_t w, int e) {
  return kq_as_float(kq_byte_perm(w, 0x43000000u, 0x7054u | (e << 8)));
}

// The float of a small integer v (< 2^23).
LATHE_KQ_HD float kq_int(uint32_t v) {
  return kq_as_float(v | 0x4B000000u) - 8388608.0f;
}

LATHE_KQ_HD float kq_f16(uint32_t bits) {
  return f16_bits_to_float(bits);
}

// A scheduling fence for the compiler (no instruction): shared-memory loads are not hoisted across
// it. Without it the compiler issues all of a unit's activation loads at once for every row of a
// task, which does not fit the 128 registers of two blocks per SM and spills.
LATHE_KQ_HD void kq_fence() {
#ifdef __CUDA_ARCH__
  asm volatile("" ::: "memory");
#endif
}

// sum over 4 x (128 + q): the word's 4 codes against 4 consecutive staged activations.
LATHE_KQ_HD float kq_dot4(uint32_t w, const float4& x, float acc) {
  acc = fmaf(kq_code(w, 0), x.x, acc);
  acc = fmaf(kq_code(w, 1), x.y, acc);
  acc = fmaf(kq_code(w, 2), x.z, acc);
  return fmaf(kq_code(w, 3), x.w, acc);
}

// Unit `unit` of one row against activation rows [0, M): adds the row's part to out[mi].
// xs: the staged rows (row mi at xs + mi * kq_row_floats(k)); sums: S16 of row mi at
// sums + mi * (k / 16).
template <int K, int M>
LATHE_KQ_HD void kq_unit(const KqUnit& u, int unit, const float* xs, const float* sums, int64_t k,
                         float (&out)[M]) {
  const int b = unit >> 2, c = unit & 3;
  const int64_t rf = kq_row_floats(k);
  if constexpr (K == kQ4K || K == kQ5K) {
    // Sub-blocks j = 2 c + s (s = 0, 1): 6-bit scale and min from the 12 bytes (y, z, w words):
    // j < 4: sc = y[j] & 63, m = z[j] & 63; j >= 4 (jj = j - 4): sc = (w[jj] & 15) | (y[jj] >> 6)
    // << 4, m = (w[jj] >> 4) | (z[jj] >> 6) << 4. Both sub-blocks' bytes at once (16-bit pairs).
    const int shift = 16 * (c & 1);
    const uint32_t y = (u.h.y >> shift) & 0xFFFFu, z = (u.h.z >> shift) & 0xFFFFu,
                   w = (u.h.w >> shift) & 0xFFFFu;
    uint32_t sc2, m2;
    if (c < 2) {
      sc2 = y & 0x3F3Fu;
      m2 = z & 0x3F3Fu;
    } else {
      sc2 = (w & 0x0F0Fu) | ((y >> 2) & 0x3030u);
      m2 = ((w >> 4) & 0x0F0Fu) | ((z >> 2) & 0x3030u);
    }
    const float d = kq_f16(u.h.x), dmin = kq_f16(u.h.x >> 16);
    float d1[2], off[2];
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      d1[s] = d * kq_int((sc2 >> (8 * s)) & 0xFFu);
      off[s] = fmaf(128.0f, d1[s], dmin * kq_int((m2 >> (8 * s)) & 0xFFu));
    }
    const uint32_t cw[8] = {u.c[0].x, u.c[0].y, u.c[0].z, u.c[0].w,
                            u.c[1].x, u.c[1].y, u.c[1].z, u.c[1].w};
    const int x0 = 256 * b + 64 * c;  // sub-block s's inputs: x0 + 32 s + l
#pragma unroll
    for (int mi = 0; mi < M; ++mi) {
      const float* xr = xs + mi * rf;
      float acc[2] = {0.0f, 0.0f};
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        uint32_t lo = cw[i] & 0x0F0F0F0Fu, hi = (cw[i] >> 4) & 0x0F0F0F0Fu;
        if constexpr (K == kQ5K) {
          // Unit order: byte r of the unit's 8 holds the pairs (bit 0: sub-block 2 c, bit 1:
          // 2 c + 1) of weights r, 16 + r, 8 + r, 24 + r from bit 0 up; hw brings those of word
          // i's weights to bits 0-1 of each byte (formed here, not kept: registers are short).
          const uint32_t hw = ((i & 1) ? u.e.y : u.e.x) >> (4 * ((i >> 1) & 1) + 2 * (i >> 2));
          lo |= (hw << 4) & 0x10101010u;
          hi |= (hw << 3) & 0x10101010u;
        }
        acc[0] = kq_dot4(lo, *reinterpret_cast<const float4*>(xr + kq_pad(x0 + 4 * i)), acc[0]);
        acc[1] =
            kq_dot4(hi, *reinterpret_cast<const float4*>(xr + kq_pad(x0 + 32 + 4 * i)), acc[1]);
        if (i % (K == kQ5K ? 2 : 4) == 1 + (K == kQ5K ? 0 : 2)) kq_fence();
      }
      const float4 s = *reinterpret_cast<const float4*>(sums + mi * (k / 16) + x0 / 16);
      out[mi] = fmaf(d1[0], acc[0], out[mi]) - off[0] * (s.x + s.y);
      out[mi] = fmaf(d1[1], acc[1], out[mi]) - off[1] * (s.z + s.w);
    }
  } else if constexpr (K == kInt4) {
    // w = d (q - 8): d * sum (128 + q) x - 136 d * S over each 32-weight group s (words 4 s ..
    // 4 s + 3). A word's low nibbles are weights 8 i + 0, 2, 4, 6, its high ones 8 i + 1, 3, 5, 7.
    const float d[2] = {kq_f16(u.dq), kq_f16(u.dq >> 16)};
    const uint32_t cw[8] = {u.c[0].x, u.c[0].y, u.c[0].z, u.c[0].w,
                            u.c[1].x, u.c[1].y, u.c[1].z, u.c[1].w};
    const int x0 = 64 * unit;
#pragma unroll
    for (int mi = 0; mi < M; ++mi) {
      const float* xr = xs + mi * rf;
      float acc[2] = {0.0f, 0.0f};
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const uint32_t lo = cw[i] & 0x0F0F0F0Fu, hi = (cw[i] >> 4) & 0x0F0F0F0Fu;
        const float4 a = *reinterpret_cast<const float4*>(xr + kq_pad(x0 + 8 * i));
        const float4 e = *reinterpret_cast<const float4*>(xr + kq_pad(x0 + 8 * i + 4));
        float t = acc[i / 4];
        t = fmaf(kq_code(lo, 0), a.x, t);
        t = fmaf(kq_code(hi, 0), a.y, t);
        t = fmaf(kq_code(lo, 1), a.z, t);
        t = fmaf(kq_code(hi, 1), a.w, t);
        t = fmaf(kq_code(lo, 2), e.x, t);
        t = fmaf(kq_code(hi, 2), e.y, t);
        t = fmaf(kq_code(lo, 3), e.z, t);
        acc[i / 4] = fmaf(kq_code(hi, 3), e.w, t);
        if (i % 4 == 3) kq_fence();
      }
      const float4 s = *reinterpret_cast<const float4*>(sums + mi * (k / 16) + x0 / 16);
      out[mi] = fmaf(d[0], acc[0], out[mi]) - (136.0f * d[0]) * (s.x + s.y);
      out[mi] = fmaf(d[1], acc[1], out[mi]) - (136.0f * d[1]) * (s.z + s.w);
    }
  } else if constexpr (K == kQ4_1 || K == kQ5_0 || K == kQ5_1) {
    // Blocks bb = 0, 1 of the unit (words 4 bb .. 4 bb + 3; word i's low nibbles are weights
    // 4 i + e of the block, its high ones 16 + 4 i + e); Q5: the high bit of weight 4 i + e + 16 s
    // at bit 2 i + s of byte e of the block's qh'. Q4_1 / Q5_1: w = d q + m -> d * acc - (128 d -
    // m) * S; Q5_0: w = d (q - 16) -> d * acc - 144 d * S, over each block's 32 inputs.
    float d[2], off[2];
#pragma unroll
    for (int bb = 0; bb < 2; ++bb) {
      if constexpr (K == kQ5_0) {
        d[bb] = kq_f16(u.dq >> (16 * bb));
        off[bb] = 144.0f * d[bb];
      } else {
        const uint32_t dm = bb ? u.h.y : u.h.x;
        d[bb] = kq_f16(dm);
        off[bb] = fmaf(128.0f, d[bb], -kq_f16(dm >> 16));
      }
    }
    const uint32_t cw[8] = {u.c[0].x, u.c[0].y, u.c[0].z, u.c[0].w,
                            u.c[1].x, u.c[1].y, u.c[1].z, u.c[1].w};
    const int x0 = 64 * unit;
#pragma unroll
    for (int mi = 0; mi < M; ++mi) {
      const float* xr = xs + mi * rf;
      float acc[2] = {0.0f, 0.0f};
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const int bb = i / 4, ii = i % 4;
        uint32_t lo = cw[i] & 0x0F0F0F0Fu, hi = (cw[i] >> 4) & 0x0F0F0F0Fu;
        if constexpr (K != kQ4_1) {
          const uint32_t qh = bb ? u.e.y : u.e.x;
          lo |= kq_shl(qh, 4 - 2 * ii) & 0x10101010u;
          hi |= kq_shl(qh, 3 - 2 * ii) & 0x10101010u;
        }
        acc[bb] = kq_dot4(lo, *reinterpret_cast<const float4*>(xr + kq_pad(x0 + 32 * bb + 4 * ii)),
                          acc[bb]);
        acc[bb] = kq_dot4(
            hi, *reinterpret_cast<const float4*>(xr + kq_pad(x0 + 32 * bb + 16 + 4 * ii)), acc[bb]);
        if (i % (K == kQ4_1 ? 4 : 2) == (K == kQ4_1 ? 3 : 1)) kq_fence();
      }
      const float4 s = *reinterpret_cast<const float4*>(sums + mi * (k / 16) + x0 / 16);
      out[mi] = fmaf(d[0], acc[0], out[mi]) - off[0] * (s.x + s.y);
      out[mi] = fmaf(d[1], acc[1], out[mi]) - off[1] * (s.z + s.w);
    }
  } else if constexpr (K == kQ2K || K == kQ3K) {
    // qs': shift 2 s of word i holds the codes of weights 16 s + 4 i + e of the unit (inputs x0 +
    // 16 s + 4 i + e), one scale per 16 (s). Q2_K: w = d sc q - dmin m -> dl * acc - (128 dl + ml)
    // * S16. Q3_K: code q | high bit << 2 (hmask': bit 4 (s % 2) + i of byte e of word s / 2), w =
    // dl (code - 4) -> dl * acc - 132 dl * S16, scales 4 c + s: the low nibble (c / 2) of byte s of
    // h.x, the 2 bits 2 c of byte s of h.y, minus 32.
    float dl[4], off[4];
    if constexpr (K == kQ2K) {
      const float d = kq_f16(u.dq), dmin = kq_f16(u.dq >> 16);
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        const uint32_t sc = (u.h.x >> (8 * s)) & 0xFFu;
        dl[s] = d * kq_int(sc & 0xFu);
        off[s] = fmaf(128.0f, dl[s], dmin * kq_int(sc >> 4));
      }
    } else {
      const float d = kq_f16(u.dq);
      const uint32_t sc4 =
          ((u.h.x >> (4 * (c >> 1))) & 0x0F0F0F0Fu) | (((u.h.y >> (2 * c)) << 4) & 0x30303030u);
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        dl[s] = d * (kq_int((sc4 >> (8 * s)) & 0xFFu) - 32.0f);
        off[s] = 132.0f * dl[s];
      }
    }
    const uint32_t cw[4] = {u.c[0].x, u.c[0].y, u.c[0].z, u.c[0].w};
    const int x0 = 256 * b + 64 * c;
#pragma unroll
    for (int mi = 0; mi < M; ++mi) {
      const float* xr = xs + mi * rf;
      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int s = 0; s < 4; ++s) {
          uint32_t q = (cw[i] >> (2 * s)) & 0x03030303u;
          if constexpr (K == kQ3K)
            q |= kq_shl(s < 2 ? u.e.x : u.e.y, 2 - (4 * (s % 2) + i)) & 0x04040404u;
          acc[s] = kq_dot4(q, *reinterpret_cast<const float4*>(xr + kq_pad(x0 + 16 * s + 4 * i)),
                           acc[s]);
        }
        kq_fence();
      }
      const float4 sm = *reinterpret_cast<const float4*>(sums + mi * (k / 16) + x0 / 16);
      const float s16[4] = {sm.x, sm.y, sm.z, sm.w};
#pragma unroll
      for (int s = 0; s < 4; ++s) out[mi] = fmaf(dl[s], acc[s], out[mi]) - off[s] * s16[s];
    }
  } else {
    // Q6_K half h, positions l0 + l (l < 16) of quarters q = 0..3 (inputs 128 h + 32 q + l0 + l):
    // q0 = low nibble of run 0, q1 = low of run 1, q2 = high of run 0, q3 = high of run 1, each
    // with 2 high bits from bits 2 q of the high-bit byte; scale 8 h + 2 q + l0 / 16.
    const int h = c >> 1, l0 = 16 * (c & 1);
    const float d = kq_f16(u.dq);
    // Scales 8 h + l0 / 16 + 2 q (int8): byte 2 (q & 1) + l0 / 16 of word x (q < 2) or y of the
    // half's 8 bytes (words x, y for h = 0; z, w for h = 1).
    const uint32_t s_lo = h ? u.h.z : u.h.x, s_hi = h ? u.h.w : u.h.y;
    const int sel = l0 / 16;
    float d1[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const uint32_t word = q < 2 ? s_lo : s_hi;
      const int byte = 2 * (q & 1) + sel;
      const int8_t sc = static_cast<int8_t>((word >> (8 * byte)) & 0xFFu);
      d1[q] = d * static_cast<float>(sc);
    }
    const uint32_t r0[4] = {u.c[0].x, u.c[0].y, u.c[0].z, u.c[0].w};
    const uint32_t r1[4] = {u.c[1].x, u.c[1].y, u.c[1].z, u.c[1].w};
    const uint32_t hb[4] = {u.e.x, u.e.y, u.e.z, u.e.w};
    const int x0 = 256 * b + 128 * h + l0;
#pragma unroll
    for (int mi = 0; mi < M; ++mi) {
      const float* xr = xs + mi * rf;
      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const uint32_t q0 = (r0[i] & 0x0F0F0F0Fu) | ((hb[i] << 4) & 0x30303030u);
        const uint32_t q1 = (r1[i] & 0x0F0F0F0Fu) | ((hb[i] << 2) & 0x30303030u);
        const uint32_t q2 = ((r0[i] >> 4) & 0x0F0F0F0Fu) | (hb[i] & 0x30303030u);
        const uint32_t q3 = ((r1[i] >> 4) & 0x0F0F0F0Fu) | ((hb[i] >> 2) & 0x30303030u);
        acc[0] = kq_dot4(q0, *reinterpret_cast<const float4*>(xr + kq_pad(x0 + 4 * i)), acc[0]);
        acc[1] =
            kq_dot4(q1, *reinterpret_cast<const float4*>(xr + kq_pad(x0 + 32 + 4 * i)), acc[1]);
        acc[2] =
            kq_dot4(q2, *reinterpret_cast<const float4*>(xr + kq_pad(x0 + 64 + 4 * i)), acc[2]);
        acc[3] =
            kq_dot4(q3, *reinterpret_cast<const float4*>(xr + kq_pad(x0 + 96 + 4 * i)), acc[3]);
      }
      const float* s = sums + mi * (k / 16) + x0 / 16;
#pragma unroll
      for (int q = 0; q < 4; ++q)
        out[mi] = fmaf(d1[q], acc[q], out[mi]) - (160.0f * d1[q]) * s[2 * q];
    }
  }
}

// The sums of each 16 staged inputs of m rows, in a fixed order.
__device__ __forceinline__ void kq_sums(int m, int64_t k, const float* xs, float* sums) {
  const int64_t rf = kq_row_floats(k), groups = k / 16;
  for (int64_t i = threadIdx.x; i < m * groups; i += kKqThreads) {
    const int64_t mi = i / groups, g = i % groups;
    const float* r = xs + mi * rf + kq_pad(static_cast<int>(16 * g));
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < 16; ++j) s += r[j];
    sums[i] = s;
  }
  __syncthreads();
}

// x of the block into shared memory as fp32 (padded), then the sums of each 16 inputs.
template <typename T, int M>
__device__ __forceinline__ void kq_stage_x(const T* x, int64_t k, float* xs, float* sums) {
  const int64_t rf = kq_row_floats(k);
  const int64_t vecs = k / 8;
  for (int mi = 0; mi < M; ++mi)
    for (int64_t v = threadIdx.x; v < vecs; v += kKqThreads) {
      float f[8];
      load8(x + mi * k + 8 * v, f);
      float* o = xs + mi * rf + kq_pad(static_cast<int>(8 * v));
      *reinterpret_cast<float4*>(o) = make_float4(f[0], f[1], f[2], f[3]);
      *reinterpret_cast<float4*>(o + 4) = make_float4(f[4], f[5], f[6], f[7]);
    }
  __syncthreads();
  kq_sums(M, k, xs, sums);
}

// One launch: parts of one k-quant kind (row_offset: their first row in the product), the tasks
// [task_begin, task_end) of the output (gemv_epilogue.cuh's task_rows; kStore / kResidualAdd: task
// t holds rows row_begin + 2 t and + 1), and where the sums go.
constexpr int kKqMaxParts = kKquantMaxParts;
struct KqLaunch {
  QuantPart parts[kKqMaxParts];
  int32_t nparts = 0;
  int32_t task_begin = 0, task_end = 0;
  int32_t row_begin = 0, row_end = 0;  // rows of the launch's parts
  TileNormInput norm;  // residual set: x = the RMSNorm of its one row (x unused; M = 1)
  PairOut out;         // kStore: y [m, ldy] (f32 when out_f32); kResidualAdd: f32 residual [m, ldy]
  int64_t ldy = 0;     // kSwiglu / kRopeKv: out's own strides
  bool out_f32 = false;
};

// The part holding row `row` (row_begin <= row < row_end): the row's codes, scales and aux bytes.
struct KqRowPtrs {
  const uint8_t* data;
  const uint8_t* scales;
  const uint8_t* aux;
};
template <int K>
LATHE_KQ_HD KqRowPtrs kq_row(const KqLaunch& L, int row) {
  int i = 0;
  while (i + 1 < L.nparts && row >= L.parts[i + 1].row_offset) ++i;
  const QuantPart& p = L.parts[i];
  // The row's first weight in 64-weight units (kq_pairs kinds: k a multiple of 64) or in 256-weight
  // blocks, and the bytes per such piece.
  constexpr int kPer = kq_pairs<K>() ? 4 : 1;
  const int64_t first = (row - p.row_offset) * (p.k / (256 / kPer));
  return {static_cast<const uint8_t*>(p.data) + first * (kq_block_bytes<K>() / kPer),
          static_cast<const uint8_t*>(p.scales) + first * (kq_scale_bytes<K>() / kPer),
          static_cast<const uint8_t*>(p.gguf_aux) + first * (kq_aux_bytes<K>() / kPer)};
}

// Unit `unit` of a row: kq_load's block, scales and aux pointers.
template <int K>
LATHE_KQ_HD void kq_load_unit(const KqRowPtrs& r, int unit, KqUnit& u) {
  const int b = unit >> 2, c = unit & 3;
  if constexpr (kq_pairs<K>())
    kq_load<K>(r.data + 32 * unit, r.scales + unit * (kq_scale_bytes<K>() / 4),
               r.aux + unit * (kq_aux_bytes<K>() / 4), c, u);
  else
    kq_load<K>(r.data + b * kq_block_bytes<K>(), r.scales + b * kq_scale_bytes<K>(),
               r.aux + b * kq_aux_bytes<K>(), c, u);
}

// The norm input (M = 1): x = rms_norm(residual) * weight rounded to T, as add_rms_norm and the
// tile kernel's NORM variant compute it (sum of squares of float4 groups in double, thread g taking
// groups g, g + 256, ..., then warps in order), staged as fp32, then the sums of 16.
template <typename T>
__device__ __forceinline__ void kq_stage_norm(const TileNormInput& n, int64_t k, float* xs,
                                              float* sums) {
  __shared__ double scratch[kKqWarps];
  __shared__ float inv_rms;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t groups = k / 4;
  const float4* row = reinterpret_cast<const float4*>(n.residual);
  double ss = 0.0;
  for (int64_t g = threadIdx.x; g < groups; g += kKqThreads) ss += sum_sq4(row[g]);
  ss = warp_sum(ss);
  if (lane == 0) scratch[warp] = ss;
  __syncthreads();
  if (threadIdx.x == 0) {
    double t = 0.0;
#pragma unroll
    for (int w = 0; w < kKqWarps; ++w) t += scratch[w];
    inv_rms =
        static_cast<float>(1.0 / sqrt(t / static_cast<double>(k) + static_cast<double>(n.eps)));
  }
  __syncthreads();
  const float inv = inv_rms;
  const float4* nw = reinterpret_cast<const float4*>(n.weight);
  for (int64_t g = threadIdx.x; g < groups; g += kKqThreads) {
    const float4 h = row[g], w = nw[g];
    const float4 v = make_float4(
        to_float(from_float<T>((h.x * inv) * w.x)), to_float(from_float<T>((h.y * inv) * w.y)),
        to_float(from_float<T>((h.z * inv) * w.z)), to_float(from_float<T>((h.w * inv) * w.w)));
    *reinterpret_cast<float4*>(xs + kq_pad(static_cast<int>(4 * g))) = v;
  }
  __syncthreads();
  kq_sums(1, k, xs, sums);
}

template <int K, typename T, int M, GemvOutput OUT>
__global__ void __launch_bounds__(kKqThreads, M == 1 ? 2 : 1)
    quant_gemv_kquants_kernel(const __grid_constant__ KqLaunch L, const T* x) {
  extern __shared__ __align__(16) float kq_smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t k = L.parts[0].k;
  const int units = static_cast<int>(k / 64);
  const int steps = (units + 31) / 32;  // lane strides per row
  const int nw = static_cast<int>(gridDim.x) * kKqWarps;
  // The rows of task t (kStore / kResidualAdd: from row_begin; rows past row_end are re-reads of
  // the last row and not stored).
  auto rows_of = [&](int t, int(&rows)[kKqRows]) {
    if constexpr (OUT == GemvOutput::kStore || OUT == GemvOutput::kResidualAdd) {
      rows[0] = L.row_begin + 2 * t;
      rows[1] = rows[0] + 1;
    } else {
      task_rows<OUT>(L.out, t, rows[0], rows[1]);
    }
  };

  int ld_task = L.task_begin + static_cast<int>(blockIdx.x) * kKqWarps + warp;
  int ld_step = 0;
  KqRowPtrs ld_rows[kKqRows];
  auto issue = [&](KqUnit(&b)[kKqRows]) {
    if (ld_task >= L.task_end) return;
    if (ld_step == 0) {
      int rows[kKqRows];
      rows_of(ld_task, rows);
#pragma unroll
      for (int r = 0; r < kKqRows; ++r) ld_rows[r] = kq_row<K>(L, min(rows[r], L.row_end - 1));
    }
    const int unit = ld_step * 32 + lane;
    if (unit < units) {
#pragma unroll
      for (int r = 0; r < kKqRows; ++r) kq_load_unit<K>(ld_rows[r], unit, b[r]);
    }
    if (++ld_step == steps) ld_step = 0, ld_task += nw;
  };
  KqUnit b0[kKqRows], b1[kKqRows];
  issue(b0);
  issue(b1);
  pdl_wait();
  pdl_trigger();
  float* xs = kq_smem;
  float* sums = kq_smem + M * kq_row_floats(k);
  if (M == 1 && L.norm.residual != nullptr)
    kq_stage_norm<T>(L.norm, k, xs, sums);
  else
    kq_stage_x<T, M>(x, k, xs, sums);

  float acc[kKqRows][M];
#pragma unroll
  for (int r = 0; r < kKqRows; ++r)
#pragma unroll
    for (int mi = 0; mi < M; ++mi) acc[r][mi] = 0.0f;
  int task = L.task_begin + static_cast<int>(blockIdx.x) * kKqWarps + warp;
  int step = 0;
  auto consume = [&](const KqUnit(&b)[kKqRows]) {
    const int unit = step * 32 + lane;
    if (unit < units) {
#pragma unroll
      for (int r = 0; r < kKqRows; ++r) kq_unit<K, M>(b[r], unit, xs, sums, k, acc[r]);
    }
    if (++step < steps) return;
    float s[kKqRows][M];
#pragma unroll
    for (int r = 0; r < kKqRows; ++r)
#pragma unroll
      for (int mi = 0; mi < M; ++mi) {
        s[r][mi] = warp_sum(acc[r][mi]);
        acc[r][mi] = 0.0f;
      }
    if (lane == 0) {
      int rows[kKqRows];
      rows_of(task, rows);
#pragma unroll
      for (int mi = 0; mi < M; ++mi) {
        if constexpr (OUT == GemvOutput::kSwiglu) {
          swiglu_epilogue<T>(L.out, mi, task, s[0][mi], s[1][mi]);
        } else if constexpr (OUT == GemvOutput::kRopeKv) {
          rope_kv_epilogue<T>(L.out, mi, rows[0], rows[1], s[0][mi], s[1][mi]);
        } else {
#pragma unroll
          for (int r = 0; r < kKqRows; ++r) {
            if (rows[r] >= L.row_end) continue;
            const int64_t at = mi * L.ldy + rows[r];
            if constexpr (OUT == GemvOutput::kResidualAdd)
              static_cast<float*>(L.out.y)[at] += to_float(from_float<T>(s[r][mi]));
            else if (L.out_f32)
              static_cast<float*>(L.out.y)[at] = s[r][mi];
            else
              static_cast<T*>(L.out.y)[at] = from_float<T>(s[r][mi]);
          }
        }
      }
    }
    step = 0;
    task += nw;
  };
  while (task < L.task_end) {
    consume(b0);
    issue(b0);
    if (task >= L.task_end) break;
    consume(b1);
    issue(b1);
  }
}

// One launch of the kernel for M activation rows.
template <int K, typename T, int M, GemvOutput OUT>
cudaError_t launch_kq(const KqLaunch& L, const T* x, int sm_count, cudaStream_t stream) {
  auto kernel = quant_gemv_kquants_kernel<K, T, M, OUT>;
  const size_t smem = kquant_smem_bytes(M, L.parts[0].k);
  static std::atomic<size_t> configured{48 << 10};
  const cudaError_t err = allow_dynamic_smem(kernel, smem, configured);
  if (err != cudaSuccess) return err;
  const int per_sm = M == 1 && smem * 2 + 4096 <= 227 * 1024 ? 2 : 1;  // the launch bounds
  const int64_t blocks = std::min<int64_t>((L.task_end - L.task_begin + kKqWarps - 1) / kKqWarps,
                                           static_cast<int64_t>(sm_count) * per_sm);
  return launch_kernel(kernel, dim3(static_cast<unsigned>(blocks)), dim3(kKqThreads), smem, stream,
                       L, x);
}

// The launch L for m activation rows, in launches of up to kKqMaxM rows (the output pointers
// advanced per slab as the output's layout says). x: [m, k], 16-byte aligned, k % 8 == 0.
template <int K, GemvOutput OUT>
cudaError_t launch_kquants(KqLaunch L, DType act, const void* x, int64_t m, cudaStream_t stream) {
  thread_local int cached_device = -1;
  thread_local int sm_count = 0;
  int dev = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err != cudaSuccess) return err;
  if (dev != cached_device) {
    err = cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, dev);
    if (err != cudaSuccess) return err;
    cached_device = dev;
  }
  const int64_t k = L.parts[0].k;
  // The output pointers of activation row r0 onwards.
  auto advance = [&](KqLaunch& S, int64_t r0) {
    if constexpr (OUT == GemvOutput::kStore || OUT == GemvOutput::kResidualAdd) {
      const int64_t out_size = OUT == GemvOutput::kResidualAdd || S.out_f32 ? 4 : 2;
      S.out.y = static_cast<uint8_t*>(S.out.y) + r0 * S.ldy * out_size;
    } else if constexpr (OUT == GemvOutput::kSwiglu) {
      S.out.y = static_cast<uint8_t*>(S.out.y) + r0 * S.out.pair_stride * 2;
    } else {
      S.out.y = static_cast<uint8_t*>(S.out.y) + r0 * S.out.n * 2;
      S.out.positions += r0;
      S.out.slot_mapping += r0;
    }
  };
  for (int64_t m0 = 0; m0 < m && err == cudaSuccess; m0 += kKqMaxM) {
    const int mm = static_cast<int>(m - m0 < kKqMaxM ? m - m0 : kKqMaxM);
    KqLaunch S = L;
    if (m0 > 0) advance(S, m0);
    LATHE_DISPATCH_ACT(act, T, {
      const T* xm = static_cast<const T*>(x) + m0 * k;
      if constexpr (OUT == GemvOutput::kStore) {
        err = mm == 1 ? launch_kq<K, T, 1, OUT>(S, xm, sm_count, stream)
                      : launch_kq<K, T, 2, OUT>(S, xm, sm_count, stream);
      } else {  // the epilogues one row at a time (quant_linear.cpp takes them at batch 1)
        for (int i = 0; i < mm && err == cudaSuccess; ++i) {
          KqLaunch R = S;
          if (i > 0) advance(R, i);
          err = launch_kq<K, T, 1, OUT>(R, xm + i * k, sm_count, stream);
        }
      }
    });
  }
  return err;
}

// The unit layout's kinds (Q4_1, Q5_0, Q5_1, Q2_K, Q3_K): launch_kquants for `kind`, instantiated
// in quant_linear_kquants_units.cu (a translation unit of their own: compile time).
template <GemvOutput OUT>
cudaError_t launch_kquants_units(int kind, const KqLaunch& L, DType act, const void* x, int64_t m,
                                 cudaStream_t stream);

}  // namespace lathe::cuda::quant
