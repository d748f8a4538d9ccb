#include "engine/backend/cuda/gguf_units.h"

#include <cstring>

#include "engine/backend/cuda/gguf_repack.h"
#include "engine/core/strings.h"
#include "engine/core/thread_pool.h"

namespace lathe::cuda {
namespace {

constexpr int64_t kSuper = 256;  // weights per super-block: the layout's rows are whole ones

int bit(const uint8_t* p, int i) {
  return (p[i >> 3] >> (i & 7)) & 1;
}
void set_bit(uint8_t* p, int i, int v) {
  p[i >> 3] = static_cast<uint8_t>((p[i >> 3] & ~(1 << (i & 7))) | (v << (i & 7)));
}

// Q5_0 / Q5_1 high bits: the file's bit 4 i + e + 16 s is qh' bit 8 e + 2 i + s.
int qh_unit_bit(int file_bit) {
  const int s = file_bit / 16, i = (file_bit % 16) / 4, e = file_bit % 4;
  return 8 * e + 2 * i + s;
}

// Q2_K / Q3_K: weight w (0..255) of a block: its 2-bit code's place in the file's qs (bit index)
// and in qs' (bit index).
int qs_file_bit(int w) {
  const int h = w / 128, j = (w % 128) / 32, l = w % 32;
  return 8 * (32 * h + l) + 2 * j;
}
int qs_unit_bit(int w) {
  const int c = w / 64, s = (w % 64) / 16, i = (w % 16) / 4, e = w % 4;
  return 8 * (16 * c + 4 * i + e) + 2 * s;
}
// Q3_K: weight w's high bit in the file's hmask and in hmask'.
int hmask_file_bit(int w) {
  return 8 * (w % 32) + w / 32;
}
int hmask_unit_bit(int w) {
  const int c = w / 64, s = (w % 64) / 16, i = (w % 16) / 4, e = w % 4;
  return 8 * (8 * c + 4 * (s / 2) + e) + 4 * (s % 2) + i;
}

// Every bit of a block's data and aux pieces: f(piece, file_bit, unit_bit) with piece 0 (data) or
// 1 (aux) and the bit's index in the piece's bytes in the file's order and in the unit layout's.
template <typename F>
void for_each_bit(DType t, F f) {
  const GgufUnitPieces p = gguf_unit_pieces(t);
  auto same = [&](int piece, int from_bit, int bytes) {
    for (int b = 0; b < 8 * bytes; ++b) f(piece, from_bit + b, from_bit + b);
  };
  switch (t) {
    case DType::kQ4_1:
      same(0, 0, 16);
      break;
    case DType::kQ5_0:
    case DType::kQ5_1:
      same(0, 0, 16);
      for (int b = 0; b < 32; ++b) f(1, b, qh_unit_bit(b));
      break;
    case DType::kQ2_K:  // scales[16] as they are, then qs
      same(0, 0, 16);
      for (int w = 0; w < 256; ++w)
        for (int b = 0; b < 2; ++b) f(0, 128 + qs_file_bit(w) + b, 128 + qs_unit_bit(w) + b);
      break;
    case DType::kQ3_K:  // hmask[32], qs[64]; the 12 scale bytes (aux) as they are
      for (int w = 0; w < 256; ++w) {
        f(0, hmask_file_bit(w), hmask_unit_bit(w));
        for (int b = 0; b < 2; ++b) f(0, 256 + qs_file_bit(w) + b, 256 + qs_unit_bit(w) + b);
      }
      same(1, 0, p.aux);
      break;
    default:
      break;
  }
}

}  // namespace

GgufUnitPieces gguf_unit_pieces(DType type) {
  switch (type) {
    case DType::kQ4_1:
      return {16, 4, 0, 4, 0, 0};
    case DType::kQ5_0:
      return {16, 2, 4, 6, 0, 2};
    case DType::kQ5_1:
      return {16, 4, 4, 8, 0, 4};
    case DType::kQ2_K:
      return {80, 4, 0, 0, 80, 0};
    case DType::kQ3_K:
      return {96, 2, 12, 0, 108, 96};
    default:
      return {};
  }
}

bool gguf_takes_units(const WeightMatrix& m) {
  // Q4_1 / Q5_0 / Q5_1: whole 64-weight units (two blocks); Q2_K / Q3_K: whole super-blocks.
  const int64_t unit = dtype_info(m.dtype).block_size == 32 ? 64 : kSuper;
  return m.format == WeightFormat::kGguf && gguf_unit_pieces(m.dtype).data > 0 && m.k % unit == 0 &&
         m.n > 0;
}

RepackShape gguf_units_shape(const WeightMatrix& m) {
  const GgufUnitPieces p = gguf_unit_pieces(m.dtype);
  const int64_t blocks = m.n * (m.k / dtype_info(m.dtype).block_size);
  RepackShape s;
  s.bits = m.dtype == DType::kQ4_1   ? 4
           : m.dtype == DType::kQ2_K ? 2
           : m.dtype == DType::kQ3_K ? 3
                                     : 5;
  s.group_size = static_cast<int32_t>(dtype_info(m.dtype).block_size);
  s.scale_dtype = DType::kF16;
  s.data_bytes = blocks * p.data;
  s.scale_bytes = blocks * p.scales;
  s.zero_bytes = blocks * p.aux;
  s.has_zeros = p.aux > 0;
  return s;
}

void gguf_block_to_units(DType type, const uint8_t* block, uint8_t* data, uint8_t* scales,
                         uint8_t* aux) {
  const GgufUnitPieces p = gguf_unit_pieces(type);
  std::memcpy(scales, block + p.scales_from, static_cast<size_t>(p.scales));
  const uint8_t* file[2] = {block + p.data_from, block + p.aux_from};
  uint8_t* unit[2] = {data, aux};
  for_each_bit(type,
               [&](int piece, int fb, int ub) { set_bit(unit[piece], ub, bit(file[piece], fb)); });
}

void gguf_block_from_units(DType type, const uint8_t* data, const uint8_t* scales,
                           const uint8_t* aux, uint8_t* block) {
  const GgufUnitPieces p = gguf_unit_pieces(type);
  std::memcpy(block + p.scales_from, scales, static_cast<size_t>(p.scales));
  uint8_t* file[2] = {block + p.data_from, block + p.aux_from};
  const uint8_t* unit[2] = {data, aux};
  for_each_bit(type,
               [&](int piece, int fb, int ub) { set_bit(file[piece], fb, bit(unit[piece], ub)); });
}

Result<RepackedPart> gguf_to_units(const WeightMatrix& m) {
  if (!gguf_takes_units(m))
    return invalid_argument(m.name +
                            ": only GGUF q4_1, q5_0, q5_1 (k a multiple of 64), q2_k and q3_k (of "
                            "256) parts take the unit layout, not " +
                            m.describe());
  const GgufUnitPieces p = gguf_unit_pieces(m.dtype);
  const int64_t block_bytes = dtype_info(m.dtype).block_bytes;
  const int64_t blocks = m.n * (m.k / dtype_info(m.dtype).block_size);
  LATHE_RETURN_IF_ERROR(check_gguf_host_blocks(m, blocks, block_bytes));
  RepackedPart out;
  out.data.resize(static_cast<size_t>(blocks * p.data));
  out.scales.resize(static_cast<size_t>(blocks * p.scales));
  out.zeros.resize(static_cast<size_t>(blocks * p.aux));
  const uint8_t* src = m.data.bytes();
  ThreadPool::global().parallel_for(blocks, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b)
      gguf_block_to_units(m.dtype, src + b * block_bytes, out.data.data() + b * p.data,
                          out.scales.data() + b * p.scales,
                          p.aux > 0 ? out.zeros.data() + b * p.aux : nullptr);
  });
  return out;
}

}  // namespace lathe::cuda
