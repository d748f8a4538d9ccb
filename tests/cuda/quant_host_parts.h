// Stored parts for the CUDA linear-layer tests (cuda_quant_test.cpp, cuda_gguf_quant_test.cpp): a
// part as the upload stores it with its host copy and the float weights it stands for (GGUF blocks,
// GGUF Q8_0 / Q4_0 repacked into integer rows, k-quants and the unit layout's types as uploaded,
// integer codes, FP8), and expect_linear: the LinearDispatcher's product on such parts against the
// CPU reference.
#pragma once

#include <QtTest>

#include <algorithm>
#include <cstring>
#include <random>

#include "cuda_test_util.h"
#include "engine/backend/cpu/cpu_ops.h"
#include "engine/backend/cuda/cuda_weights.h"
#include "engine/backend/cuda/gemm.h"
#include "engine/backend/cuda/gguf_repack.h"
#include "engine/backend/cuda/int4_tiles.h"
#include "engine/backend/cuda/linear.h"
#include "engine/backend/cuda/quant_linear.h"
#include "engine/core/thread_pool.h"
#include "engine/model/dequant.h"
#include "engine/quant/fp8.h"
#include "engine/quant/ggml_quantize.h"
#include "kquant_test_util.h"
#include "test_support.h"

namespace lathe::test {

// A stored part with its host copy (the bytes uploaded) and the float weights it stands for.
struct HostPart {
  cuda::QuantPart part;
  std::vector<float> dense;  // [n, k], the reference weights
  std::vector<Dev> buffers;  // device copies the part points at
};

// GGUF blocks of `type` for an [n, k] matrix: random floats quantized where Lathe has the
// quantizer (quantize_rows_ggml), else (q2_k, q3_k) random bytes with positive f16 super-block
// scales d (and dmin) in [0.002, 0.02): every pattern of codes, sub-block scales and mins, and
// Q3_K high bits.
inline std::vector<uint8_t> gguf_blocks(DType type, int64_t n, int64_t k, uint32_t seed) {
  const int64_t row_bytes = k / dtype_info(type).block_size * dtype_info(type).block_bytes;
  std::vector<uint8_t> blocks(static_cast<size_t>(n * row_bytes));
  if (can_quantize_ggml(type)) {
    const std::vector<float> w = random_floats(static_cast<size_t>(n * k), seed, -0.5f, 0.5f);
    if (!quantize_rows_ggml(type, w.data(), n, k, blocks.data()).is_ok()) qFatal("quantize");
    return blocks;
  }
  if (type != DType::kQ2_K && type != DType::kQ3_K) qFatal("gguf_blocks: no writer for the type");
  std::mt19937 rng(seed);
  for (uint8_t& b : blocks) b = static_cast<uint8_t>(rng() & 0xFF);
  std::uniform_real_distribution<float> scale(0.002f, 0.02f);
  const int64_t bytes = dtype_info(type).block_bytes;
  for (size_t at = 0; at < blocks.size(); at += static_cast<size_t>(bytes)) {
    // Q2_K: f16 d, dmin at bytes 80, 82; Q3_K: f16 d at byte 108 (dequant.h).
    for (int64_t off :
         type == DType::kQ2_K ? std::vector<int64_t>{80, 82} : std::vector<int64_t>{108}) {
      const uint16_t h = f32_to_f16(scale(rng));
      std::memcpy(&blocks[at + static_cast<size_t>(off)], &h, 2);
    }
  }
  return blocks;
}

inline HostPart gguf_part(DType type, int64_t n, int64_t k, uint32_t seed) {
  HostPart h;
  const int64_t row_bytes = k / dtype_info(type).block_size * dtype_info(type).block_bytes;
  const std::vector<uint8_t> blocks = gguf_blocks(type, n, k, seed);
  h.dense.resize(static_cast<size_t>(n * k));
  for (int64_t r = 0; r < n; ++r)
    dequantize_row(type, blocks.data() + r * row_bytes, h.dense.data() + r * k, k);
  h.buffers.push_back(Dev::from(blocks));
  h.part.format = WeightFormat::kGguf;
  h.part.gguf_type = type;
  h.part.data = h.buffers[0].get();
  h.part.n = n;
  h.part.k = k;
  return h;
}

// GGUF blocks of `type` (q8_0 or q4_0) converted on the host into the integer row layout as the
// upload converts a file's (gguf_repack.h), described as the upload describes them; the reference
// weights are the blocks' dequantize_row values.
inline HostPart repacked_gguf_part(DType type, int64_t n, int64_t k, uint32_t seed) {
  HostPart h;
  const int64_t row_bytes = k / 32 * dtype_info(type).block_bytes;
  const std::vector<uint8_t> blocks = gguf_blocks(type, n, k, seed);
  h.dense.resize(static_cast<size_t>(n * k));
  for (int64_t r = 0; r < n; ++r)
    dequantize_row(type, blocks.data() + r * row_bytes, h.dense.data() + r * k, k);
  const WeightMatrix m = plain_matrix("blk.0.attn_q", make_view(type, {n, k}, blocks.data()));
  if (!cuda::gguf_repacks(m)) qFatal("repacked_gguf_part: not a q8_0 / q4_0 part");
  auto r = cuda::gguf_repack(m);
  if (!r.is_ok()) qFatal("%s", r.status().message().c_str());
  const cuda::RepackShape s = cuda::gguf_repack_shape(m);
  h.buffers.push_back(Dev::from(r.value().data));
  h.buffers.push_back(Dev::from(r.value().scales));
  cuda::QuantPart& p = h.part;
  p.format = WeightFormat::kInt;
  p.bits = s.bits;
  p.group_size = s.group_size;
  p.scale_dtype = s.scale_dtype;
  p.data = h.buffers[0].get();
  p.scales = h.buffers[1].get();
  p.n = n;
  p.k = k;
  return h;
}

// A k-quant part as the upload stores it (kquant_device_part): Q4_K blocks as they are, Q5_K with
// its high bits in unit order, Q6_K split into 208-byte slots and the d array (gguf_repack.h), Q4_1
// / Q5_0 / Q5_1 / Q2_K / Q3_K in the unit layout (gguf_units.h); random bytes or quantized random
// floats. A row of 32-weight blocks is k / 32 blocks.
inline HostPart kquant_part(DType type, int64_t n, int64_t k, uint32_t seed, bool random_bytes) {
  const std::vector<uint8_t> blocks =
      random_bytes ? random_kquant_blocks(type, n, k, seed) : gguf_blocks(type, n, k, seed);
  HostPart h;
  const int64_t row_bytes = k / dtype_info(type).block_size * dtype_info(type).block_bytes;
  h.dense.resize(static_cast<size_t>(n * k));
  for (int64_t r = 0; r < n; ++r)
    dequantize_row(type, blocks.data() + r * row_bytes, h.dense.data() + r * k, k);
  KquantDevicePart d = kquant_device_part(type, blocks, n, k);
  h.part = d.part;
  h.buffers = std::move(d.buffers);
  return h;
}

// Integer codes in Lathe's row layout (quant_linear.h), random scales and zero points.
// tiles: 4-bit codes in the tensor-core tile layout (int4_tiles.h) instead.
inline HostPart int_part(int bits, int64_t n, int64_t k, int group, bool zeros, bool act_order,
                         uint32_t seed, bool tiles = false) {
  std::mt19937 rng(seed);
  HostPart h;
  const int per = 32 / bits;
  const int64_t groups = k / group;
  std::vector<uint32_t> words(static_cast<size_t>(n * k / per), 0);
  std::vector<uint16_t> scales(static_cast<size_t>(n * groups));
  std::vector<uint8_t> zp(static_cast<size_t>(n * groups));
  std::vector<int32_t> g_idx(static_cast<size_t>(k));
  for (int64_t j = 0; j < k; ++j) g_idx[static_cast<size_t>(j)] = static_cast<int32_t>(j / group);
  if (act_order) std::shuffle(g_idx.begin(), g_idx.end(), rng);
  std::uniform_int_distribution<int> code(0, (1 << bits) - 1);
  std::uniform_real_distribution<float> sc(0.001f, 0.02f);
  for (size_t i = 0; i < scales.size(); ++i) {
    scales[i] = f32_to_f16(sc(rng));
    zp[i] = static_cast<uint8_t>(zeros ? code(rng) : 1 << (bits - 1));
  }
  h.dense.resize(static_cast<size_t>(n * k));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < k; ++j) {
      const uint32_t q = static_cast<uint32_t>(code(rng));
      if (tiles) {
        const cuda::Int4TileAt at = cuda::int4_tile_at(r, j, k);
        words[static_cast<size_t>(at.word)] |= q << (4 * at.nibble);
      } else {
        words[static_cast<size_t>((r * k + j) / per)] |= q << ((j % per) * bits);
      }
      const size_t g = static_cast<size_t>(r * groups + g_idx[static_cast<size_t>(j)]);
      h.dense[static_cast<size_t>(r * k + j)] =
          f16_to_f32(scales[g]) * (static_cast<float>(q) - static_cast<float>(zp[g]));
    }
  h.buffers.push_back(Dev::from(words));
  h.buffers.push_back(Dev::from(scales));
  h.buffers.push_back(Dev::from(zp));
  h.buffers.push_back(Dev::from(g_idx));
  cuda::QuantPart& p = h.part;
  p.format = WeightFormat::kInt;
  p.bits = bits;
  p.group_size = group;
  p.data = h.buffers[0].get();
  p.scales = h.buffers[1].get();
  p.zeros = zeros ? h.buffers[2].as<uint8_t>() : nullptr;
  p.g_idx = act_order ? h.buffers[3].as<int32_t>() : nullptr;
  p.n = n;
  p.k = k;
  p.int4_tiles = tiles;
  return h;
}

inline HostPart fp8_part(Fp8ScaleKind kind, int64_t n, int64_t k, uint32_t seed) {
  HostPart h;
  const std::vector<float> w = random_floats(static_cast<size_t>(n * k), seed, -0.3f, 0.3f);
  const Fp8Matrix m = quantize_fp8(w.data(), n, k, kind);
  h.dense = dequantize_fp8(m);
  h.buffers.push_back(Dev::from(m.codes));
  h.buffers.push_back(Dev::from(m.scales));
  h.part.format = WeightFormat::kFp8;
  h.part.fp8_scale = kind == Fp8ScaleKind::kTensor    ? ScaleGranularity::kTensor
                     : kind == Fp8ScaleKind::kChannel ? ScaleGranularity::kChannel
                                                      : ScaleGranularity::kBlock;
  h.part.data = h.buffers[0].get();
  h.part.scales = h.buffers[1].get();
  h.part.n = n;
  h.part.k = k;
  return h;
}

// y = x · Wᵀ through the LinearDispatcher for the given parts (stacked by rows) at batch m,
// against the CPU on the same bf16 activations. `ws_rows`: dequantization workspace in rows (small
// values force slabs).
inline void expect_linear(const std::vector<HostPart*>& parts, int64_t m, int64_t ws_rows,
                          double tol, const QString& what) {
  const DType dt = DType::kBF16;
  const int64_t k = parts[0]->part.k;
  cuda::DeviceLinear w;
  w.name = "test";
  w.k = k;
  std::vector<float> dense;
  for (HostPart* h : parts) {
    h->part.row_offset = w.n;
    w.parts.push_back(h->part);
    w.n += h->part.n;
    dense.insert(dense.end(), h->dense.begin(), h->dense.end());
    if (w.format == WeightFormat::kDense) w.format = h->part.format;
  }
  const std::vector<float> x = round_to(dt, random_floats(static_cast<size_t>(m * k), 77));
  std::vector<float> ref(static_cast<size_t>(m * w.n));
  const TensorView wv = make_view(DType::kF32, {w.n, k}, dense.data());
  cpu::linear(x.data(), m, wv, nullptr, ref.data(), ThreadPool::global());

  auto gemm = cuda::Gemm::create();
  QVERIFY(gemm.is_ok());
  cuda::LinearDispatcher disp(gemm.value().get(), dt, true);
  Dev ws = Dev::poisoned(ws_rows * k * 2);
  disp.set_dequant_workspace(ws.get(), ws_rows * k * 2);
  Dev dx = Dev::from(encode16(dt, x));
  Dev dy = Dev::poisoned(m * w.n * 4);
  LATHE_QVERIFY_OK(disp.run(w, DType::kF32, dx.get(), dy.get(), m, nullptr));
  LATHE_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> out = dy.download<float>(static_cast<size_t>(m * w.n));
  const double err = rel_error(out, ref);
  QVERIFY2(
      err <= tol,
      qPrintable(QString("%1 m=%2: relative error %3 > %4").arg(what).arg(m).arg(err).arg(tol)));
}

inline constexpr int64_t kBatches[] = {1, 2, 4, 8, 16, 64, 256};

}  // namespace lathe::test
