// Device side of gemv_w8.h for decode_gemv's kernel (decode_gemv_kernel.cuh): the 8-bit decode,
// and where a row of a product finds its codes, scales and zero points.
#pragma once

#include <cuda_fp8.h>

#include "engine/backend/cuda/gemv_w8.h"
#include "engine/backend/cuda/kernel_utils.cuh"

namespace lathe::cuda {

// A kernel's view of its 8-bit parts: unused ones start at INT32_MAX; k the inputs per row.
struct W8Rows {
  GemvW8Part parts[kGemvMaxParts];
  GemvW8Scales scales;
  int32_t k = 0;
};

// The view of w (n: the product's rows; unused parts past them).
inline W8Rows w8_rows(const GemvW8& w, int64_t k) {
  W8Rows r;
  for (int i = 0; i < kGemvMaxParts; ++i) {
    r.parts[i] = i < w.nparts ? w.parts[i] : GemvW8Part{};
    if (i >= w.nparts) r.parts[i].row_begin = 0x7FFFFFFF;
  }
  r.scales = w.scales;
  r.k = static_cast<int32_t>(k);
  return r;
}

// Weights 2 j and 2 j + 1 of a 32-bit word of codes as an f16 pair, before their scale, exact.
// kInt8: code - zero, the codes under the exponent byte 0x64 (the f16 1024 + code) minus mz2, the
// pair (1024 + zero, 1024 + zero) (f16_zero_pair); kFp8: e4m3 pairs to f16 pairs in one instruction
// (sm_89+; every e4m3 value is an f16).
template <GemvWeights WK>
__device__ __forceinline__ __half2 decode_pair(uint32_t word, int j, uint32_t mz2) {
  if constexpr (WK == GemvWeights::kInt8) {
    const uint32_t h = __byte_perm(word, 0x64646464u, j == 0 ? 0x4140 : 0x4342);
    return __hsub2(*reinterpret_cast<const __half2*>(&h), *reinterpret_cast<const __half2*>(&mz2));
  } else {
    const __half2_raw hr =
        __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(word >> (16 * j)), __NV_E4M3);
    return *reinterpret_cast<const __half2*>(&hr);
  }
}

// The f16 pair (1024 + zero, 1024 + zero) of decode_pair.
__device__ __forceinline__ uint32_t f16_zero_pair(uint32_t zero) {
  return (0x6400u | zero) * 0x00010001u;
}

// The 8-bit part that holds `row` (parts in row order; unused ones start at INT32_MAX), chosen
// field by field so that the parameter array is never indexed dynamically (which would copy it to
// local memory).
struct PartRow {
  const uint8_t* codes;  // the row's codes
  const uint8_t* zeros;  // the part's zero points, or null
  const void* scales;    // the part's scales
  int32_t scale_row;     // index of the row's first scale
};
__device__ __forceinline__ PartRow part_row(const W8Rows& p, int row) {
  const bool in1 = row >= p.parts[1].row_begin, in2 = row >= p.parts[2].row_begin;
  const GemvW8Part& a = p.parts[0];
  const GemvW8Part& b = p.parts[1];
  const GemvW8Part& c = p.parts[2];
  const int r = row - (in2 ? c.row_begin : in1 ? b.row_begin : a.row_begin);
  PartRow pr;
  pr.codes = (in2 ? c.codes : in1 ? b.codes : a.codes) + static_cast<int64_t>(r) * p.k;
  pr.zeros = in2 ? c.zeros : in1 ? b.zeros : a.zeros;
  pr.scales = in2 ? c.scales : in1 ? b.scales : a.scales;
  pr.scale_row = (r >> p.scales.row_shift) * p.scales.row_stride;
  return pr;
}

// The index of vector v's scale (and zero point) in its part.
__device__ __forceinline__ int scale_index(const W8Rows& p, const PartRow& pr, int v) {
  return pr.scale_row + ((v * 16) >> p.scales.group_shift);
}

// Scale and decode_pair's zero pair (kInt8; zero 128 without zero points) at index si of a part.
template <GemvWeights WK>
__device__ __forceinline__ void scale_at(const W8Rows& p, const PartRow& pr, int si, float& scale,
                                         uint32_t& mz2) {
  scale = p.scales.f16 ? __half2float(__ldg(static_cast<const __half*>(pr.scales) + si))
                       : __ldg(static_cast<const float*>(pr.scales) + si);
  mz2 = 0u;
  if constexpr (WK == GemvWeights::kInt8)
    mz2 = f16_zero_pair(pr.zeros != nullptr ? __ldg(pr.zeros + si) : 128u);
}

__device__ __forceinline__ void prefetch_l2(const void* ptr) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(ptr));
}

}  // namespace lathe::cuda
