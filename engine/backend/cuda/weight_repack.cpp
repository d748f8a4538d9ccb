#include "engine/backend/cuda/weight_repack.h"

#include <cstring>

#include "engine/backend/cuda/int4_tiles.h"
#include "engine/core/half.h"
#include "engine/core/strings.h"
#include "engine/core/thread_pool.h"

namespace lathe::cuda {
namespace {

// AWQ GEMM: column offset c (0..7) within a word sits in nibble kAwqNibble[c].
constexpr int kAwqNibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};

uint32_t word_at(const TensorView& t, int64_t i) {
  uint32_t w;
  std::memcpy(&w, t.bytes() + 4 * i, 4);
  return w;
}

float scale_at(const TensorView& t, int64_t i) {
  uint16_t h = 0;
  switch (t.dtype) {
    case DType::kF32: {
      float f;
      std::memcpy(&f, t.bytes() + 4 * i, 4);
      return f;
    }
    case DType::kF16:
      std::memcpy(&h, t.bytes() + 2 * i, 2);
      return f16_to_f32(h);
    default:
      std::memcpy(&h, t.bytes() + 2 * i, 2);
      return bf16_to_f32(h);
  }
}

bool present(const TensorView& t) {
  return t.ndim > 0 && t.data != nullptr;
}

// The stored index of scale (r, g) in the checkpoint's layout.
int64_t scale_index(const WeightMatrix& m, int64_t r, int64_t g, int64_t groups) {
  const WeightQuant& q = m.quant;
  switch (q.layout) {
    case IntLayout::kGptq:
    case IntLayout::kAwq:
      return g * m.n + r;
    case IntLayout::kInt8Rows:
      if (q.granularity == ScaleGranularity::kTensor) return 0;
      if (q.granularity == ScaleGranularity::kChannel) return r;
      return r * groups + g;
    default:
      return r * groups + g;
  }
}

int64_t aligned(int64_t v) {
  return (v + kRepackAlign - 1) / kRepackAlign * kRepackAlign;
}

}  // namespace

int64_t RepackShape::scales_at() const {
  return aligned(data_bytes);
}
int64_t RepackShape::zeros_at() const {
  return scales_at() + aligned(scale_bytes);
}
int64_t RepackShape::g_idx_at() const {
  return zeros_at() + aligned(zero_bytes);
}
int64_t RepackShape::bytes() const {
  return g_idx_at() + aligned(g_idx_bytes);
}

Result<RepackShape> repack_shape(const WeightMatrix& m, bool int4_tiles) {
  RepackShape s;
  const WeightQuant& q = m.quant;
  if (m.k % 32 != 0)
    return unsupported(strformat("%s: the CUDA kernels take inputs in multiples of 32, not %lld",
                                 m.name.c_str(), static_cast<long long>(m.k)));
  if (m.format == WeightFormat::kFp8) {
    s.data_bytes = m.n * m.k;
    s.scale_dtype = DType::kF32;
    s.fp8_scale = q.granularity;
    if (q.granularity == ScaleGranularity::kTensor) {
      s.scale_bytes = 4;
    } else if (q.granularity == ScaleGranularity::kChannel) {
      s.scale_bytes = 4 * m.n;
    } else if (q.granularity == ScaleGranularity::kBlock && q.block_rows == 128 &&
               q.block_cols == 128) {
      s.scale_bytes = 4 * ((m.n + 127) / 128) * ((m.k + 127) / 128);
    } else {
      return unsupported(m.name +
                         ": the CUDA kernels take FP8 scales per tensor, per channel or "
                         "per 128x128 block, not " +
                         m.describe());
    }
    return s;
  }
  if (m.format != WeightFormat::kInt)
    return internal_error(m.name + ": repack of a " + std::string(weight_format_name(m.format)) +
                          " matrix");
  s.bits = q.layout == IntLayout::kInt8Rows ? 8 : q.bits;
  if (s.bits != 4 && s.bits != 8)
    return unsupported(
        strformat("%s: %d-bit codes (the CUDA kernels take 4 and 8)", m.name.c_str(), s.bits));
  s.group_size =
      q.granularity == ScaleGranularity::kGroup ? q.group_size : static_cast<int32_t>(m.k);
  if (s.group_size % 32 != 0 || m.k % s.group_size != 0)
    return unsupported(
        strformat("%s: group size %d (the CUDA kernels take multiples of 32 that "
                  "divide the %lld inputs)",
                  m.name.c_str(), s.group_size, static_cast<long long>(m.k)));
  const int64_t groups = m.k / s.group_size;
  s.scale_dtype = q.scales.dtype == DType::kF16 ? DType::kF16 : DType::kF32;
  s.data_bytes = m.n * m.k * s.bits / 8;
  s.scale_bytes = m.n * groups * (s.scale_dtype == DType::kF16 ? 2 : 4);
  // Zero points: GPTQ and AWQ store them always; compressed-tensors when asymmetric; int8 rows
  // never (zero 128 after the shift).
  s.has_zeros = present(q.zeros) && q.layout != IntLayout::kInt8Rows &&
                !(q.layout == IntLayout::kCompressedTensors && q.symmetric);
  s.zero_bytes = s.has_zeros ? m.n * groups : 0;
  s.has_g_idx = present(q.g_idx);
  s.g_idx_bytes = s.has_g_idx ? 4 * m.k : 0;
  s.int4_tiles = int4_tiles && s.bits == 4 && int4_tiles_fit(m.n, m.k, s.group_size, s.has_g_idx);
  return s;
}

RepackedPart repack(const WeightMatrix& m, const RepackShape& s) {
  RepackedPart out;
  const WeightQuant& q = m.quant;
  out.data.resize(static_cast<size_t>(s.data_bytes));
  out.scales.resize(static_cast<size_t>(s.scale_bytes));
  if (m.format == WeightFormat::kFp8) {
    std::memcpy(out.data.data(), m.data.bytes(), static_cast<size_t>(s.data_bytes));
    float* sc = reinterpret_cast<float*>(out.scales.data());
    for (int64_t i = 0; i < s.scale_bytes / 4; ++i) sc[i] = scale_at(q.scales, i);
    return out;
  }
  const int b = s.bits, per = 32 / b;
  const uint32_t mask = (1u << b) - 1;
  const int64_t n = m.n, k = m.k, groups = k / s.group_size;
  out.zeros.resize(static_cast<size_t>(s.zero_bytes));
  out.g_idx.resize(static_cast<size_t>(s.g_idx_bytes));
  if (s.has_g_idx)
    std::memcpy(out.g_idx.data(), q.g_idx.bytes(), static_cast<size_t>(s.g_idx_bytes));
  const int in_per = 32 / (q.layout == IntLayout::kInt8Rows ? 8 : q.bits);
  uint32_t* words = reinterpret_cast<uint32_t*>(out.data.data());
  // Whole tiles per task in the tile layout (a word holds codes of rows g and g + 8).
  const int64_t unit = s.int4_tiles ? kInt4TileRows : 1;
  ThreadPool::global().parallel_for(n / unit, [&](int64_t u0, int64_t u1) {
    for (int64_t r = u0 * unit; r < u1 * unit; ++r) {
      // Codes, unsigned along k.
      for (int64_t j = 0; j < k; ++j) {
        uint32_t code = 0;
        switch (q.layout) {
          case IntLayout::kGptq:
            code = (word_at(m.data, (j / in_per) * n + r) >> (b * (j % in_per))) & mask;
            break;
          case IntLayout::kAwq:
            code = (word_at(m.data, j * (n / 8) + r / 8) >> (4 * kAwqNibble[r % 8])) & 15u;
            break;
          case IntLayout::kCompressedTensors:
            code = (word_at(m.data, r * ((k + in_per - 1) / in_per) + j / in_per) >>
                    (b * (j % in_per))) &
                   mask;
            break;
          default:  // kInt8Rows: signed codes shifted to unsigned, zero 128
            code =
                static_cast<uint32_t>(static_cast<int32_t>(m.data.as<int8_t>()[r * k + j]) + 128);
            break;
        }
        if (s.int4_tiles) {
          const Int4TileAt at = int4_tile_at(r, j, k);
          words[at.word] |= code << (4 * at.nibble);
        } else {
          words[(r * k + j) / per] |= code << (b * (j % per));
        }
      }
      for (int64_t g = 0; g < groups; ++g) {
        const int64_t si = scale_index(m, r, g, groups);
        const int64_t at = r * groups + g;
        if (s.scale_dtype == DType::kF16) {
          std::memcpy(out.scales.data() + 2 * at, q.scales.bytes() + 2 * si, 2);
        } else {
          const float f = scale_at(q.scales, si);
          std::memcpy(out.scales.data() + 4 * at, &f, 4);
        }
        if (!s.has_zeros) continue;
        uint32_t z = 0;
        if (q.layout == IntLayout::kGptq) {
          z = ((word_at(q.zeros, g * (n / in_per) + r / in_per) >> (b * (r % in_per))) & mask) +
              (q.zeros_minus_one ? 1 : 0);
        } else if (q.layout == IntLayout::kAwq) {
          z = (word_at(q.zeros, g * (n / 8) + r / 8) >> (4 * kAwqNibble[r % 8])) & 15u;
        } else {
          z = (word_at(q.zeros, (r / in_per) * groups + g) >> (b * (r % in_per))) & mask;
        }
        out.zeros[static_cast<size_t>(at)] = static_cast<uint8_t>(z);
      }
    }
  });
  return out;
}

}  // namespace lathe::cuda
