// Lathe's tensor-core layout of 4-bit integer codes (QuantPart::int4_tiles), shared by the upload
// (weight_repack.cpp), the kernels (quant_gemv_tiles.cuh, quant_decode.cuh) and the tests.
//
// The decode product runs on mma.sync.m16n8k16 with the weights as the A operand (16 output rows)
// and up to 8 activation rows as B. A part in this layout is cut into tiles of 16 rows and chunks
// of 64 inputs; chunk c of tile T is 512 contiguous bytes, 16 per lane of a warp, so that lane
// L = 4 g + t (g = L / 4, t = L % 4) loads its A fragments of the chunk's four k16 steps in one
// 16-byte load. Within a chunk the inputs are permuted (a dot product does not care about the
// order, only that A and B agree): input 16 t + 4 kb + e (e = 0..3) is column 2 t + e of k16 step
// kb when e < 2 and column 2 t + 8 + e - 2 otherwise, so that the lane's B fragments of the chunk
// are 16 consecutive activations (two 16-byte loads). Word kb of the lane's 16 bytes holds step
// kb: nibble j + 4 f is register j's half f, registers 0..3 being (row g, e 0..1), (row g + 8,
// e 0..1), (row g, e 2..3), (row g + 8, e 2..3); so register j of the fragment is
// ((word >> 4 j) & 0x000F000F) under the exponent of a magic number, one mask per two weights.
//
// Requirements: n % 16 == 0, k % 64 == 0, a group size that is a multiple of 64 (a chunk never
// spans two groups), no act-order g_idx. Scales and zero points keep the row layout.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define LATHE_HOST_DEVICE __host__ __device__
#else
#define LATHE_HOST_DEVICE
#endif

namespace lathe::cuda {

constexpr int64_t kInt4TileRows = 16;
constexpr int64_t kInt4TileK = 64;

// Where the code of (row, input) of an n x k part lives: u32 word index from the part's start, and
// the nibble in it.
struct Int4TileAt {
  int64_t word;
  int nibble;
};

LATHE_HOST_DEVICE constexpr Int4TileAt int4_tile_at(int64_t row, int64_t input, int64_t k) {
  const int64_t tile = row / kInt4TileRows, chunk = input / kInt4TileK;
  const int g = static_cast<int>(row % 8), upper = static_cast<int>((row % 16) / 8);
  const int in = static_cast<int>(input % kInt4TileK);
  const int t = in / 16, kb = (in % 16) / 4, e = in % 4;
  const int lane = 4 * g + t;
  const int reg = upper + 2 * (e / 2);
  return {((tile * (k / kInt4TileK) + chunk) * 32 + lane) * 4 + kb, reg + 4 * (e % 2)};
}

// Whether a 4-bit part of this shape can take the layout.
LATHE_HOST_DEVICE constexpr bool int4_tiles_fit(int64_t n, int64_t k, int64_t group_size,
                                                bool act_order) {
  return !act_order && n % kInt4TileRows == 0 && k % kInt4TileK == 0 && group_size > 0 &&
         group_size % kInt4TileK == 0 && k % group_size == 0;
}

}  // namespace lathe::cuda
