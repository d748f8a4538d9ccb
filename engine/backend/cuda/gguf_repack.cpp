#include "engine/backend/cuda/gguf_repack.h"

#include <cstring>

#include "engine/core/strings.h"
#include "engine/core/thread_pool.h"

namespace lathe::cuda {
namespace {

constexpr int64_t kBlock = 32;  // weights per Q8_0 / Q4_0 block and per scale group
constexpr int64_t kQ6Weights = 256, kQ6Bytes = 210, kQ6Slot = 208;

}  // namespace

Status check_gguf_host_blocks(const WeightMatrix& m, int64_t blocks, int64_t block_bytes) {
  if (m.data.data == nullptr)
    return invalid_argument(m.name +
                            ": no host blocks to repack (dummy parts are filled on the device)");
  if (m.data.nbytes() != blocks * block_bytes)
    return invalid_argument(strformat("%s: %lld bytes of blocks, expected %lld for [%lld, %lld]",
                                      m.name.c_str(), static_cast<long long>(m.data.nbytes()),
                                      static_cast<long long>(blocks * block_bytes),
                                      static_cast<long long>(m.n), static_cast<long long>(m.k)));
  return Status();
}

bool gguf_repacks(const WeightMatrix& m) {
  return m.format == WeightFormat::kGguf && (m.dtype == DType::kQ8_0 || m.dtype == DType::kQ4_0) &&
         m.k % kBlock == 0 && m.n > 0;
}

RepackShape gguf_repack_shape(const WeightMatrix& m) {
  RepackShape s;
  s.bits = m.dtype == DType::kQ8_0 ? 8 : 4;
  s.group_size = static_cast<int32_t>(kBlock);
  s.scale_dtype = DType::kF16;
  s.data_bytes = m.n * m.k * s.bits / 8;
  s.scale_bytes = m.n * (m.k / kBlock) * 2;
  return s;
}

Result<RepackedPart> gguf_repack(const WeightMatrix& m) {
  if (!gguf_repacks(m))
    return invalid_argument(m.name + ": only GGUF q8_0 and q4_0 parts take the integer row " +
                            "layout, not " + m.describe());
  const bool q8 = m.dtype == DType::kQ8_0;
  const int64_t block_bytes = dtype_info(m.dtype).block_bytes, blocks = m.n * (m.k / kBlock);
  LATHE_RETURN_IF_ERROR(check_gguf_host_blocks(m, blocks, block_bytes));
  const RepackShape s = gguf_repack_shape(m);
  RepackedPart out;
  out.data.resize(static_cast<size_t>(s.data_bytes));
  out.scales.resize(static_cast<size_t>(s.scale_bytes));
  const uint8_t* src = m.data.bytes();
  uint8_t* codes = out.data.data();
  uint8_t* scales = out.scales.data();
  // Blocks are row after row along k, so block b covers the same inputs as scale b and code bytes
  // [b * 32 * bits / 8, ...) of the row layout.
  ThreadPool::global().parallel_for(blocks, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const uint8_t* blk = src + b * block_bytes;
      std::memcpy(scales + 2 * b, blk, 2);  // f16 d, little-endian as stored
      const uint8_t* qs = blk + 2;
      if (q8) {
        uint8_t* c = codes + b * 32;
        for (int j = 0; j < 32; ++j) c[j] = static_cast<uint8_t>(qs[j] ^ 0x80u);  // q + 128
      } else {
        // Element j of the block in nibble j % 2 of byte j / 2 (little-endian words: nibble j % 8
        // of word j / 8). GGUF: q[j] = qs[j] & 15, q[j + 16] = qs[j] >> 4 for j < 16.
        uint8_t* c = codes + b * 16;
        auto q = [&](int j) { return j < 16 ? (qs[j] & 15u) : (qs[j - 16] >> 4); };
        for (int i = 0; i < 16; ++i) c[i] = static_cast<uint8_t>(q(2 * i) | (q(2 * i + 1) << 4));
      }
    }
  });
  return out;
}

bool gguf_splits_q6k(const WeightMatrix& m) {
  return m.format == WeightFormat::kGguf && m.dtype == DType::kQ6_K && m.k % kQ6Weights == 0 &&
         m.n > 0;
}

RepackShape gguf_q6k_split_shape(const WeightMatrix& m) {
  RepackShape s;
  const int64_t blocks = m.n * (m.k / kQ6Weights);
  s.bits = 6;
  s.group_size = 16;
  s.scale_dtype = DType::kF16;
  s.data_bytes = blocks * kQ6Slot;
  s.scale_bytes = blocks * 2;
  return s;
}

bool gguf_reorders_q5k(const WeightMatrix& m) {
  return m.format == WeightFormat::kGguf && m.dtype == DType::kQ5_K && m.k % kQ6Weights == 0 &&
         m.n > 0;
}

void q5k_qh_to_units(const uint8_t* qh, uint8_t* out) {
  for (int c = 0; c < 4; ++c)
    for (int r = 0; r < 8; ++r) {
      auto two = [&](int i) { return (qh[i] >> (2 * c)) & 3; };
      out[8 * c + r] =
          static_cast<uint8_t>(two(r) | two(16 + r) << 2 | two(8 + r) << 4 | two(24 + r) << 6);
    }
}

void q5k_qh_from_units(const uint8_t* units, uint8_t* qh) {
  std::memset(qh, 0, 32);
  for (int c = 0; c < 4; ++c)
    for (int r = 0; r < 8; ++r) {
      const int u = units[8 * c + r];
      qh[r] |= static_cast<uint8_t>((u & 3) << (2 * c));
      qh[16 + r] |= static_cast<uint8_t>(((u >> 2) & 3) << (2 * c));
      qh[8 + r] |= static_cast<uint8_t>(((u >> 4) & 3) << (2 * c));
      qh[24 + r] |= static_cast<uint8_t>(((u >> 6) & 3) << (2 * c));
    }
}

Result<RepackedPart> gguf_reorder_q5k(const WeightMatrix& m) {
  if (!gguf_reorders_q5k(m))
    return invalid_argument(m.name + ": only GGUF q5_k parts take the unit order, not " +
                            m.describe());
  constexpr int64_t kQ5Bytes = 176;
  const int64_t blocks = m.n * (m.k / kQ6Weights);
  LATHE_RETURN_IF_ERROR(check_gguf_host_blocks(m, blocks, kQ5Bytes));
  RepackedPart out;
  out.data.assign(m.data.bytes(), m.data.bytes() + blocks * kQ5Bytes);
  ThreadPool::global().parallel_for(blocks, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      uint8_t* blk = out.data.data() + b * kQ5Bytes;
      q5k_qh_to_units(m.data.bytes() + b * kQ5Bytes + 16, blk + 16);
    }
  });
  return out;
}

Result<RepackedPart> gguf_split_q6k(const WeightMatrix& m) {
  if (!gguf_splits_q6k(m))
    return invalid_argument(m.name + ": only GGUF q6_k parts take the split layout, not " +
                            m.describe());
  const int64_t blocks = m.n * (m.k / kQ6Weights);
  LATHE_RETURN_IF_ERROR(check_gguf_host_blocks(m, blocks, kQ6Bytes));
  RepackedPart out;
  out.data.resize(static_cast<size_t>(blocks * kQ6Slot));
  out.scales.resize(static_cast<size_t>(blocks * 2));
  const uint8_t* src = m.data.bytes();
  ThreadPool::global().parallel_for(blocks, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      std::memcpy(out.data.data() + b * kQ6Slot, src + b * kQ6Bytes, kQ6Slot);
      std::memcpy(out.scales.data() + 2 * b, src + b * kQ6Bytes + kQ6Slot, 2);  // f16 d
    }
  });
  return out;
}

WeightMatrix gguf_repacked_matrix(const WeightMatrix& m, const RepackedPart& r) {
  const RepackShape s = gguf_repack_shape(m);
  WeightMatrix w;
  w.name = m.name;
  w.format = WeightFormat::kInt;
  w.dtype = DType::kI32;
  w.n = m.n;
  w.k = m.k;
  w.scheme = "compressed-tensors";
  w.data = make_view(DType::kI32, {m.n, m.k * s.bits / 32}, r.data.data());
  WeightQuant& q = w.quant;
  q.bits = s.bits;
  q.group_size = s.group_size;
  q.granularity = ScaleGranularity::kGroup;
  q.layout = IntLayout::kCompressedTensors;
  q.symmetric = true;
  q.scales = make_view(DType::kF16, {m.n, m.k / s.group_size}, r.scales.data());
  return w;
}

}  // namespace lathe::cuda
