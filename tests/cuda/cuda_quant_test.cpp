// Linear layers on stored formats (quant_linear.h, linear.h's stored path) against the CPU
// reference: every GGUF block type (Q2_K and Q3_K on random blocks, also at tail shapes), 4- and
// 8-bit integer codes (group and channel scales, zero points, act-order g_idx), FP8 with
// per-tensor / per-channel / block scales, and projections of several parts in different formats,
// at batch sizes 1, 2, 4, 8 (quant_gemv), 16, 64 and 256 (the dequantize-then-GEMM path, also in
// slabs), with odd output counts. The weight plan's choice of stored formats is checked on the
// host.
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
#include "engine/model/layer_weights.h"
#include "engine/model/model_loader.h"
#include "engine/quant/fp8.h"
#include "engine/quant/ggml_quantize.h"
#include "kquant_test_util.h"
#include "test_support.h"

using namespace lathe;
using namespace lathe::test;

namespace {

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
std::vector<uint8_t> gguf_blocks(DType type, int64_t n, int64_t k, uint32_t seed) {
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

HostPart gguf_part(DType type, int64_t n, int64_t k, uint32_t seed) {
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
HostPart repacked_gguf_part(DType type, int64_t n, int64_t k, uint32_t seed) {
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

// A k-quant part as the upload stores it: Q4_K / Q5_K blocks as they are, Q6_K split into
// 208-byte slots and the d array (gguf_repack.h); random bytes or quantized random floats.
HostPart kquant_part(DType type, int64_t n, int64_t k, uint32_t seed, bool random_bytes) {
  const std::vector<uint8_t> blocks =
      random_bytes ? random_kquant_blocks(type, n, k, seed) : gguf_blocks(type, n, k, seed);
  HostPart h;
  const int64_t row_bytes = k / 256 * dtype_info(type).block_bytes;
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
HostPart int_part(int bits, int64_t n, int64_t k, int group, bool zeros, bool act_order,
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

HostPart fp8_part(Fp8ScaleKind kind, int64_t n, int64_t k, uint32_t seed) {
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
void expect_linear(const std::vector<HostPart*>& parts, int64_t m, int64_t ws_rows, double tol,
                   const QString& what) {
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

const int64_t kBatches[] = {1, 2, 4, 8, 16, 64, 256};

}  // namespace

class CudaQuantTest : public QObject {
  Q_OBJECT
 private slots:
  void gguf_types_match_cpu_data() {
    QTest::addColumn<int>("type");
    for (DType t : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1,
                    DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K})
      QTest::newRow(std::string(dtype_name(t)).c_str()) << static_cast<int>(t);
  }
  void gguf_types_match_cpu() {
    LATHE_REQUIRE_GPU();
    QFETCH(int, type);
    const DType t = static_cast<DType>(type);
    HostPart h = gguf_part(t, 77, 512, 11 + static_cast<uint32_t>(type));
    for (int64_t m : kBatches) {
      // quant_gemv reads the weights exactly; the GEMM path rounds them to bf16 first.
      expect_linear({&h}, m, 77, m <= cuda::kQuantGemvMaxM ? 2e-3 : 1e-2, dtype_name(t).data());
      if (QTest::currentTestFailed()) return;
    }
  }

  // Q2_K and Q3_K (random blocks: every code, scale and high-bit pattern) at shapes with tails:
  // 5 rows (the one-row kernel's second block has one warp of four busy), odd row counts, one
  // super-block per row (k 256: 8 lanes of a warp busy) and rows longer than a warp's 32 chunks
  // (k 2304); batches 1..256 with odd ones (quant_gemv up to 8, then the dequantize path, in slabs
  // of fewer rows than the part).
  // GGUF Q8_0 and Q4_0 parts as the upload converts them into the integer row layout
  // (gguf_repack.h): the multi-row kernel (k % 64 == 0), the one-row kernel (k = 96 for 4-bit:
  // not a whole number of 64-weight steps; and one_row_gemv), and the dequantize-then-GEMM path
  // compute the CPU's product on the blocks' values; with a part left in its blocks in the same
  // projection (q6_k) too.
  void gguf_repacked_match_cpu_data() {
    QTest::addColumn<int>("type");
    QTest::addColumn<int>("k");
    for (DType t : {DType::kQ8_0, DType::kQ4_0})
      for (int k : {512, 96, 4096})
        QTest::newRow(qPrintable(QString("%1 k=%2").arg(dtype_name(t).data()).arg(k)))
            << static_cast<int>(t) << k;
  }
  void gguf_repacked_match_cpu() {
    LATHE_REQUIRE_GPU();
    QFETCH(int, type);
    QFETCH(int, k);
    const DType t = static_cast<DType>(type);
    HostPart h = repacked_gguf_part(t, 77, k, 41 + static_cast<uint32_t>(type + k));
    std::string why;
    QVERIFY2(cuda::quant_part_supported(h.part, &why), why.c_str());
    // The decoded weights are the blocks' exactly: the dequantize path's bf16 rows are the CPU's
    // float values rounded once.
    {
      Dev out = Dev::poisoned(77 * k * 2);
      LATHE_QVERIFY_OK(cuda::quant_dequantize(h.part, DType::kBF16, out.get(), 0, 77, nullptr));
      LATHE_CUDA_CHECK(cudaDeviceSynchronize());
      const std::vector<uint16_t> got = out.download<uint16_t>(static_cast<size_t>(77 * k));
      QVERIFY(got == encode16(DType::kBF16, h.dense));
    }
    for (int64_t m : kBatches)
      expect_linear({&h}, m, 77, m <= cuda::kQuantGemvMaxM ? 2e-3 : 1e-2, QTest::currentDataTag());
    HostPart one_row = repacked_gguf_part(t, 45, k, 43);
    one_row.part.one_row_gemv = true;
    expect_linear({&one_row}, 3, 45, 2e-3, "one-row kernel");
    if (k % 256 == 0) {
      HostPart a = repacked_gguf_part(t, 48, k, 44);
      HostPart b = gguf_part(DType::kQ6_K, 16, k, 45);
      for (int64_t m : {1, 8, 64})
        expect_linear({&a, &b}, m, 30, m <= cuda::kQuantGemvMaxM ? 2e-3 : 1e-2, "repacked|q6_k");
    }
  }

  // The k-quant decode kernel (quant_gemv_kquants.cuh) on Q4_K and Q5_K blocks as stored and Q6_K
  // split as uploaded, quantized floats and random bytes: k from one super-block to 14336 (the
  // two-row launch's 129 KB of staged activations), 2304 (36 units: a partial second lane step),
  // odd row counts (a warp task's second row past the end), batches 1-8 (launches of one and two
  // activation rows, odd counts). The split Q6_K part also dequantizes (prefill path) to the CPU's
  // values exactly, and the one-row kernel reads the split layout too.
  void kquant_kernel_matches_cpu_data() {
    QTest::addColumn<int>("type");
    QTest::addColumn<int>("n");
    QTest::addColumn<int>("k");
    QTest::addColumn<bool>("random_bytes");
    for (DType t : {DType::kQ4_K, DType::kQ5_K, DType::kQ6_K})
      for (auto [n, k] : {std::pair{77, 256}, {33, 2304}, {64, 4096}, {9, 14336}})
        for (bool rb : {false, true})
          QTest::newRow(qPrintable(QString("%1 n=%2 k=%3%4")
                                       .arg(dtype_name(t).data())
                                       .arg(n)
                                       .arg(k)
                                       .arg(rb ? " random bytes" : "")))
              << static_cast<int>(t) << n << k << rb;
  }
  void kquant_kernel_matches_cpu() {
    LATHE_REQUIRE_GPU();
    QFETCH(int, type);
    QFETCH(int, n);
    QFETCH(int, k);
    QFETCH(bool, random_bytes);
    const DType t = static_cast<DType>(type);
    HostPart h = kquant_part(t, n, k, 61 + static_cast<uint32_t>(type + k), random_bytes);
    std::string why;
    QVERIFY2(cuda::quant_part_supported(h.part, &why), why.c_str());
    if (t == DType::kQ6_K) {
      Dev out = Dev::poisoned(n * k * 2);
      LATHE_QVERIFY_OK(cuda::quant_dequantize(h.part, DType::kBF16, out.get(), 0, n, nullptr));
      LATHE_CUDA_CHECK(cudaDeviceSynchronize());
      QVERIFY(out.download<uint16_t>(static_cast<size_t>(n * k)) ==
              encode16(DType::kBF16, h.dense));
    }
    for (int64_t m : {1, 2, 3, 5, 8}) {
      expect_linear({&h}, m, n, 2e-3, QTest::currentDataTag());
      if (QTest::currentTestFailed()) return;
    }
    h.part.one_row_gemv = true;
    expect_linear({&h}, 3, n, 2e-3, "one-row kernel");
  }

  void low_bit_k_quants_match_cpu_data() {
    QTest::addColumn<int>("type");
    QTest::addColumn<int>("n");
    QTest::addColumn<int>("k");
    for (DType t : {DType::kQ2_K, DType::kQ3_K})
      for (const auto& [n, k] : {std::pair{5, 256}, std::pair{33, 768}, std::pair{129, 2304}})
        QTest::newRow(qPrintable(QString("%1 n %2 k %3").arg(dtype_name(t).data()).arg(n).arg(k)))
            << static_cast<int>(t) << n << k;
  }
  void low_bit_k_quants_match_cpu() {
    LATHE_REQUIRE_GPU();
    QFETCH(int, type);
    QFETCH(int, n);
    QFETCH(int, k);
    const DType t = static_cast<DType>(type);
    HostPart h = gguf_part(t, n, k, static_cast<uint32_t>(31 * n + k + type));
    for (int64_t m : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{4}, int64_t{7}, int64_t{8},
                      int64_t{16}, int64_t{64}, int64_t{256}}) {
      expect_linear({&h}, m, n / 2 + 1, m <= cuda::kQuantGemvMaxM ? 2e-3 : 1e-2,
                    QTest::currentDataTag());
      if (QTest::currentTestFailed()) return;
    }
  }

  void integer_codes_match_cpu_data() {
    QTest::addColumn<int>("bits");
    QTest::addColumn<int>("group");
    QTest::addColumn<bool>("zeros");
    QTest::addColumn<bool>("act_order");
    QTest::addColumn<int>("k");
    QTest::addColumn<bool>("one_row");  // the one-row decode kernel where the multi-row one applies
    QTest::newRow("int4 g128 sym") << 4 << 128 << false << false << 384 << false;
    QTest::newRow("int4 g128 sym one-row") << 4 << 128 << false << false << 384 << true;
    QTest::newRow("int4 g128 asym") << 4 << 128 << true << false << 384 << false;
    QTest::newRow("int4 g32 asym act-order") << 4 << 32 << true << true << 384 << false;
    QTest::newRow("int4 g64 sym act-order") << 4 << 64 << false << true << 384 << false;
    QTest::newRow("int4 per-channel asym") << 4 << 384 << true << false << 384 << false;
    QTest::newRow("int4 g32 asym k 352 (not whole 64-weight steps)")
        << 4 << 32 << true << false << 352 << false;
    QTest::newRow("int8 g128 sym") << 8 << 128 << false << false << 384 << false;
    QTest::newRow("int8 g32 asym one-row") << 8 << 32 << true << false << 384 << true;
    QTest::newRow("int8 per-channel asym") << 8 << 384 << true << false << 384 << false;
  }
  void integer_codes_match_cpu() {
    LATHE_REQUIRE_GPU();
    QFETCH(int, bits);
    QFETCH(int, group);
    QFETCH(bool, zeros);
    QFETCH(bool, act_order);
    QFETCH(int, k);
    QFETCH(bool, one_row);
    HostPart h = int_part(bits, 45, k, group, zeros, act_order, 5);
    h.part.one_row_gemv = one_row;
    for (int64_t m : kBatches) {
      expect_linear({&h}, m, 45, m <= cuda::kQuantGemvMaxM ? 2e-3 : 1e-2, QTest::currentDataTag());
      if (QTest::currentTestFailed()) return;
    }
  }

  // The tensor-core tile layout (int4_tiles.h): the tile kernel (quant_gemv_tiles.cuh) at batches
  // 1..100 (groups of 8 rows, slabs of 64) and, on the same codes, the one-row kernel and the
  // dequantize path (the one-row rows).
  void int4_tiles_match_cpu_data() {
    QTest::addColumn<int>("group");
    QTest::addColumn<bool>("zeros");
    QTest::addColumn<int>("k");
    QTest::addColumn<bool>("one_row");
    QTest::addColumn<int>("warps");  // the tile kernel's k split (QuantPart::int4_tile_warps)
    QTest::newRow("g128 sym") << 128 << false << 512 << false << 4;
    QTest::newRow("g128 asym") << 128 << true << 512 << false << 4;
    QTest::newRow("g128 asym, 8 warps") << 128 << true << 512 << false << 8;
    QTest::newRow("g64 asym, k 448 (chunks not a multiple of the warps)")
        << 64 << true << 448 << false << 4;
    QTest::newRow("g64 asym, k 448, 8 warps") << 64 << true << 448 << false << 8;
    QTest::newRow("per-channel asym") << 512 << true << 512 << false << 4;
    QTest::newRow("g64 sym, one chunk") << 64 << false << 64 << false << 4;
    QTest::newRow("g64 sym, k 2048 (more chunks than stages)") << 64 << false << 2048 << false << 4;
    QTest::newRow("g128 asym one-row") << 128 << true << 512 << true << 4;
  }
  void int4_tiles_match_cpu() {
    LATHE_REQUIRE_GPU();
    QFETCH(int, group);
    QFETCH(bool, zeros);
    QFETCH(int, k);
    QFETCH(bool, one_row);
    QFETCH(int, warps);
    HostPart h = int_part(4, 48, k, group, zeros, false, 13, /*tiles=*/true);
    h.part.one_row_gemv = one_row;
    h.part.int4_tile_warps = warps;
    h.part.int4_tiles_max_m =
        256;  // the slab path too (the default hands batches > 32 to the GEMM)
    // Batches above 8 take the tile kernel's 8-row groups (9, 16, 64) and slabs of 64 rows (100).
    for (int64_t m : {int64_t{1}, int64_t{3}, int64_t{5}, int64_t{7}, int64_t{8}, int64_t{9},
                      int64_t{16}, int64_t{64}, int64_t{100}}) {
      expect_linear({&h}, m, 48, m <= cuda::kQuantGemvMaxM ? 2e-3 : 1e-2, QTest::currentDataTag());
      if (QTest::currentTestFailed()) return;
    }
    // Two tiled parts after a row-layout one (row offsets), in slabs of 20 rows.
    HostPart a = int_part(4, 45, k, group, zeros, false, 14);
    HostPart b = int_part(4, 32, k, group, zeros, false, 15, true);
    b.part.int4_tiles_max_m = 256;
    for (int64_t m : {int64_t{1}, int64_t{8}, int64_t{64}, int64_t{100}})
      expect_linear({&a, &h, &b}, m, 20, m <= cuda::kQuantGemvMaxM ? 2e-3 : 1e-2, "row|tile|tile");
  }

  // The W4A16 GEMM kernel (quant_gemm_tiles.cuh) above the tile kernel's batches: partial blocks
  // of tiles and of activation rows, splits of k (and none when the workspace has no room for
  // their sums), two parts at row offsets.
  void int4_gemm_matches_cpu_data() {
    QTest::addColumn<int>("n");
    QTest::addColumn<int>("k");
    QTest::addColumn<int>("group");
    QTest::addColumn<bool>("zeros");
    QTest::addColumn<int>("ws_rows");
    QTest::newRow("n48 k512 g128 asym") << 48 << 512 << 128 << true << 48;
    QTest::newRow("n272 k2048 g64 sym: a partial block, splits")
        << 272 << 2048 << 64 << false << 272;
    QTest::newRow("n48 k448 g64 asym: 7 chunks") << 48 << 448 << 64 << true << 48;
    QTest::newRow("n32 k1024 per-channel asym") << 32 << 1024 << 1024 << true << 32;
    QTest::newRow("n272 k2048 g128: no room for splits") << 272 << 2048 << 128 << true << 1;
  }
  void int4_gemm_matches_cpu() {
    LATHE_REQUIRE_GPU();
    QFETCH(int, n);
    QFETCH(int, k);
    QFETCH(int, group);
    QFETCH(bool, zeros);
    QFETCH(int, ws_rows);
    HostPart h = int_part(4, n, k, group, zeros, false, 21, /*tiles=*/true);
    h.part.int4_tiles_max_m = 8;
    h.part.int4_gemm_max_m = 512;
    for (int64_t m : {int64_t{9}, int64_t{16}, int64_t{31}, int64_t{33}, int64_t{64}, int64_t{65},
                      int64_t{130}, int64_t{256}}) {
      QVERIFY(cuda::quant_gemm_int4_takes(h.part, m));
      expect_linear({&h}, m, ws_rows, 5e-3, QTest::currentDataTag());
      if (QTest::currentTestFailed()) return;
    }
    HostPart b = int_part(4, 32, k, group, zeros, false, 22, /*tiles=*/true);
    b.part.int4_tiles_max_m = 8;
    b.part.int4_gemm_max_m = 512;
    for (int64_t m : {int64_t{12}, int64_t{100}})
      expect_linear({&h, &b}, m, ws_rows, 5e-3, "two tiled parts");
    // Above int4_gemm_max_m: the dequantize-then-GEMM path.
    h.part.int4_gemm_max_m = 64;
    QVERIFY(!cuda::quant_gemm_int4_takes(h.part, 65));
    expect_linear({&h}, 65, n, 1e-2, "dequantized above int4_gemm_max_m");
  }

  // The GEMM's plan (host only): two waves of blocks where the shape allows, each split at least
  // kGemmMinChunks chunks, and no more splits than the workspace holds sums for.
  void int4_gemm_plan() {
    cuda::QuantPart p;
    p.n = 4096;
    p.k = 4096;  // 64 chunks
    cuda::GemmInt4Plan plan = cuda::plan_gemm_int4(p, 64, int64_t{1} << 30, 132);
    QCOMPARE(plan.rows_per_block, 64);
    QCOMPARE(plan.mblocks, 1);
    QCOMPARE(plan.nblocks, 32);
    QCOMPARE(plan.splits, 8);  // 264 blocks wanted; 64 / 8 = 8 chunks each
    QCOMPARE(plan.chunks_per_split, 8);
    plan = cuda::plan_gemm_int4(p, 20, int64_t{1} << 30, 132);
    QCOMPARE(plan.rows_per_block, 32);
    plan = cuda::plan_gemm_int4(p, 256, int64_t{1} << 30, 132);
    QCOMPARE(plan.mblocks, 4);
    QCOMPARE(plan.splits, 3);  // ceil(264 / 128) = 3 splits of 22, 22, 20 chunks
    QCOMPARE(plan.chunks_per_split, 22);
    // The workspace holds two splits' sums of 256 x 4096 only.
    plan = cuda::plan_gemm_int4(p, 256, 2 * 256 * 4096 * 4, 132);
    QCOMPARE(plan.splits, 2);
    plan = cuda::plan_gemm_int4(p, 256, 0, 132);
    QCOMPARE(plan.splits, 1);
    QCOMPARE(plan.chunks_per_split, 64);
    p.k = 448;  // 7 chunks: too short to split
    QCOMPARE(cuda::plan_gemm_int4(p, 64, int64_t{1} << 30, 132).splits, 1);
  }

  // The layout is a permutation of the codes of whole 512-byte chunks; shapes that do not fit are
  // refused (host checks: no GPU needed).
  void int4_tile_layout_is_a_permutation() {
    const int64_t n = 32, k = 192;
    std::vector<int> seen(static_cast<size_t>(n * k), 0);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = 0; j < k; ++j) {
        const cuda::Int4TileAt at = cuda::int4_tile_at(r, j, k);
        QVERIFY(at.word >= 0 && at.word < n * k / 8 && at.nibble >= 0 && at.nibble < 8);
        // Tile r / 16, chunk j / 64 own the 128 words of their 512 bytes.
        QCOMPARE(at.word / 128, (r / 16) * (k / 64) + j / 64);
        ++seen[static_cast<size_t>(at.word * 8 + at.nibble)];
      }
    QVERIFY(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
    QVERIFY(cuda::int4_tiles_fit(4096, 4096, 128, false));
    QVERIFY(cuda::int4_tiles_fit(4096, 4096, 4096, false));
    QVERIFY(!cuda::int4_tiles_fit(4096, 4096, 128, true));  // act-order
    QVERIFY(!cuda::int4_tiles_fit(4096, 4096, 32, false));  // a chunk would span two groups
    QVERIFY(!cuda::int4_tiles_fit(4104, 4096, 128, false));
    QVERIFY(!cuda::int4_tiles_fit(4096, 4064, 32, false));
    cuda::QuantPart p;
    p.format = WeightFormat::kInt;
    p.bits = 4;
    p.group_size = 32;
    p.n = 48, p.k = 512;
    p.data = &p;
    p.scales = &p;
    p.int4_tiles = true;
    std::string why;
    QVERIFY(!cuda::quant_part_supported(p, &why));
    QVERIFY2(why.find("tile layout") != std::string::npos, why.c_str());
    p.group_size = 128;
    QVERIFY2(cuda::quant_part_supported(p, &why), why.c_str());
  }

  void fp8_matches_cpu_data() {
    QTest::addColumn<int>("kind");
    QTest::newRow("per-tensor") << static_cast<int>(Fp8ScaleKind::kTensor);
    QTest::newRow("per-channel") << static_cast<int>(Fp8ScaleKind::kChannel);
    QTest::newRow("block 128") << static_cast<int>(Fp8ScaleKind::kBlock);
  }
  void fp8_matches_cpu() {
    LATHE_REQUIRE_GPU();
    QFETCH(int, kind);
    HostPart h = fp8_part(static_cast<Fp8ScaleKind>(kind), 200, 320, 9);
    HostPart one_row = fp8_part(static_cast<Fp8ScaleKind>(kind), 200, 320, 9);
    one_row.part.one_row_gemv = true;
    expect_linear({&one_row}, 3, 200, 2e-3, "one-row kernel");
    for (int64_t m : kBatches) {
      expect_linear({&h}, m, 200, m <= cuda::kQuantGemvMaxM ? 2e-3 : 1e-2, QTest::currentDataTag());
      if (QTest::currentTestFailed()) return;
    }
  }

  // A projection of parts in different formats (q|k|v of a GGUF Q4_K_M file: q4_k, q4_k, q6_k),
  // and the dequantize path in slabs smaller than the projection (the LM head's case).
  void mixed_parts_and_slabs_match_cpu() {
    LATHE_REQUIRE_GPU();
    HostPart q = gguf_part(DType::kQ4_K, 64, 512, 21);
    HostPart kk = gguf_part(DType::kQ4_K, 16, 512, 22);
    HostPart v = gguf_part(DType::kQ6_K, 16, 512, 23);
    for (int64_t m : kBatches) {
      expect_linear({&q, &kk, &v}, m, 96, m <= cuda::kQuantGemvMaxM ? 2e-3 : 1e-2,
                    "q4_k|q4_k|q6_k");
      expect_linear({&q, &kk, &v}, m, 23, m <= cuda::kQuantGemvMaxM ? 2e-3 : 1e-2,
                    "q4_k|q4_k|q6_k in slabs of 23 rows");
      if (QTest::currentTestFailed()) return;
    }
    // q|k|v of a Q3_K_M / Q2_K file: q3_k, q2_k, q6_k (odd row counts, parts straddling slabs).
    HostPart q3 = gguf_part(DType::kQ3_K, 63, 512, 24);
    HostPart k2 = gguf_part(DType::kQ2_K, 17, 512, 25);
    HostPart v6 = gguf_part(DType::kQ6_K, 15, 512, 26);
    for (int64_t m : kBatches) {
      expect_linear({&q3, &k2, &v6}, m, 95, m <= cuda::kQuantGemvMaxM ? 2e-3 : 1e-2,
                    "q3_k|q2_k|q6_k");
      expect_linear({&q3, &k2, &v6}, m, 23, m <= cuda::kQuantGemvMaxM ? 2e-3 : 1e-2,
                    "q3_k|q2_k|q6_k in slabs of 23 rows");
      if (QTest::currentTestFailed()) return;
    }
  }

  // The CUDA weight plan (cuda_weights.h) keeps Q2_K and Q3_K projections in their blocks, at their
  // bytes as stored, alone and beside other formats; a K-quant part whose input width is not whole
  // 256-weight blocks is refused by name before any allocation (host checks: no GPU needed).
  void q2_k_and_q3_k_are_planned_stored() {
    std::vector<uint8_t> bytes(64 * 2 * 210, 0);  // enough for every part below
    auto matrix = [&](const char* name, DType t, int64_t n, int64_t k) {
      return plain_matrix(name, make_view(t, {n, k}, bytes.data()));
    };
    LinearGroup g;
    g.parts = {matrix("blk.0.attn_q", DType::kQ3_K, 64, 512),
               matrix("blk.0.attn_k", DType::kQ2_K, 16, 512),
               matrix("blk.0.attn_v", DType::kQ6_K, 16, 512)};
    auto s = cuda::plan_projection(&g, 96, 512, 2, true);
    LATHE_QVERIFY_RESULT(s);
    QVERIFY(s.value().stored);
    // q6_k: split into 208-byte slots and the d array (gguf_repack.h), each piece 256-aligned.
    const int64_t q6 = 16 * 2 * 208 + 256;
    QCOMPARE(s.value().part_bytes, (std::vector<int64_t>{64 * 2 * 110, 16 * 2 * 84, q6}));
    QCOMPARE(s.value().bytes(), int64_t{64 * 2 * 110 + 16 * 2 * 84} + q6);
    for (DType t : {DType::kQ2_K, DType::kQ3_K}) {
      LinearGroup one;
      one.parts = {matrix("blk.0.ffn_down", t, 16, 512)};
      auto p = cuda::plan_projection(&one, 16, 512, 2, true);
      LATHE_QVERIFY_RESULT(p);
      QVERIFY2(p.value().stored, dtype_name(t).data());
      QCOMPARE(p.value().dense_bytes, int64_t{0});
      QCOMPARE(p.value().bytes(), 16 * 2 * dtype_info(t).block_bytes);
      // native_formats off: one dense matrix of the activation dtype.
      auto d = cuda::plan_projection(&one, 16, 512, 2, false);
      LATHE_QVERIFY_RESULT(d);
      QVERIFY(!d.value().stored);
      QCOMPARE(d.value().bytes(), int64_t{16 * 512 * 2});
      // The kernels' own check agrees.
      cuda::QuantPart qp;
      qp.format = WeightFormat::kGguf;
      qp.gguf_type = t;
      qp.n = 16, qp.k = 512;
      qp.data = bytes.data();
      std::string why;
      QVERIFY2(cuda::quant_part_supported(qp, &why), why.c_str());
      qp.k = 288;  // a multiple of 32, not of 256
      QVERIFY(!cuda::quant_part_supported(qp, &why));
      QVERIFY2(why.find("whole number of GGUF blocks") != std::string::npos, why.c_str());
      // The plan refuses such a part, naming it.
      LinearGroup bad;
      bad.parts = {matrix("blk.1.attn_output", t, 16, 288)};
      auto r = cuda::plan_projection(&bad, 16, 288, 2, true);
      QCOMPARE(r.status().code(), ErrorCode::kUnsupported);
      QVERIFY2(r.status().message().find("blk.1.attn_output") != std::string::npos &&
                   r.status().message().find("GGUF blocks") != std::string::npos,
               r.status().message().c_str());
    }
    // The GGUF fixture of test_cuda_runner's quantized_checkpoints_match_cpu (q|k|v q2_k, q3_k,
    // q2_k; gate|up q3_k, q2_k; down q8_0; o f16): every quantized projection planned stored.
    LoadOptions lo;
    lo.load_tokenizer = false;
    auto model = load_model(fixture_path("formats/gguf_q2k_q3k.gguf"), lo);
    LATHE_QVERIFY_RESULT(model);
    auto mw = bind_model_weights(model.value());
    LATHE_QVERIFY_RESULT(mw);
    const LayerWeights& l = mw.value().layers[0];
    auto plan = [](const LinearGroup& lg) {
      return cuda::plan_projection(&lg, lg.n(), lg.k(), 2, true);
    };
    auto qkv = plan(l.qkv), gate_up = plan(l.gate_up), down = plan(l.down), o = plan(l.o);
    LATHE_QVERIFY_RESULT(qkv);
    LATHE_QVERIFY_RESULT(gate_up);
    LATHE_QVERIFY_RESULT(down);
    LATHE_QVERIFY_RESULT(o);
    QVERIFY(qkv.value().stored && gate_up.value().stored && down.value().stored);
    QCOMPARE(qkv.value().part_bytes, (std::vector<int64_t>{16 * 84, 16 * 110, 16 * 84}));
    QCOMPARE(gate_up.value().part_bytes, (std::vector<int64_t>{32 * 110, 32 * 84}));
    QCOMPARE(down.value().part_bytes, (std::vector<int64_t>{256 * 34}));
    QVERIFY(!o.value().stored);  // f16: one matrix of the activation dtype
    QCOMPARE(o.value().bytes(), int64_t{256 * 16 * 2});
  }

  // What the kernels refuse, before any launch (host checks: no GPU needed).
  void unsupported_parts_are_refused() {
    cuda::QuantPart p;
    p.format = WeightFormat::kGguf;
    p.gguf_type = DType::kF16;
    p.n = 4, p.k = 64;
    p.data = &p;
    std::string why;
    QVERIFY(!cuda::quant_part_supported(p, &why));
    QVERIFY2(why.find("q4_k") != std::string::npos && why.find("q2_k") != std::string::npos &&
                 why.find("q3_k") != std::string::npos,
             why.c_str());
    p.format = WeightFormat::kInt;
    p.bits = 3;
    QVERIFY(!cuda::quant_part_supported(p, &why));
    p.bits = 4;
    p.group_size = 48;  // not a multiple of 32
    p.scales = &p;
    QVERIFY(!cuda::quant_part_supported(p, &why));
    QVERIFY2(why.find("group size") != std::string::npos, why.c_str());
    p.group_size = 32;
    p.k = 80;  // not a multiple of 32
    QVERIFY(!cuda::quant_part_supported(p, &why));
    QCOMPARE(cuda::quant_gemv(p, DType::kBF16, nullptr, DType::kF32, nullptr, 4, 1, nullptr).code(),
             ErrorCode::kUnsupported);
  }
};

QTEST_GUILESS_MAIN(CudaQuantTest)
#include "cuda_quant_test.moc"
