// Linear layers on GGUF block types (quant_linear.h, linear.h's stored path) against the CPU
// reference: every GGUF block type in its blocks (Q2_K and Q3_K on random blocks, also at tail
// shapes), Q8_0 / Q4_0 repacked into integer rows, the k-quant decode kernel on Q4_K / Q5_K / Q6_K
// as uploaded and on the unit layout of Q4_1 / Q5_0 / Q5_1 / Q2_K / Q3_K (gguf_units.h), at batch
// sizes 1 to 256 (quant_gemv up to 8, then the dequantize-then-GEMM path), with odd output counts.
// The weight plan's choice of stored formats is checked on the host.
#include <QtTest>

#include "engine/backend/cuda/gguf_units.h"
#include "engine/model/layer_weights.h"
#include "engine/model/model_loader.h"
#include "quant_host_parts.h"

using namespace lathe;
using namespace lathe::test;

class CudaGgufQuantTest : public QObject {
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

  // GGUF Q8_0 and Q4_0 parts as the upload converts them into the integer row layout
  // (gguf_repack.h): the multi-row kernel (k % 64 == 0), the one-row kernel (k = 96 for 4-bit:
  // not a whole number of 64-weight steps; and one_row_gemv), and the dequantize-then-GEMM path
  // compute the CPU's product on the blocks' values; with a part left in its blocks in the same
  // projection (q6_k) too.
  void gguf_repacked_match_cpu_data() {
    QTest::addColumn<int>("type");
    QTest::addColumn<int>("k");
    for (DType t : {DType::kQ8_0, DType::kQ4_0})
      for (int k : {512, 96, 4096, 576})
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

  // The k-quant decode kernel (quant_gemv_kquants.cuh) on Q4_K and Q5_K blocks as stored, Q6_K
  // split as uploaded, and Q4_1 / Q5_0 / Q5_1 / Q2_K / Q3_K in the unit layout (gguf_units.h);
  // quantized floats and random bytes (every code, scale, min and high-bit pattern): k from one
  // super-block to 14336 (the two-row launch's 129 KB of staged activations), 2304 (36 units: a
  // partial second lane step), 576 (SmolLM2's width: whole 64-weight units, the 32-weight kinds
  // only), odd row counts (a warp task's second row past the end), batches 1-8 (launches of one and
  // two activation rows, odd counts). The same parts through the dequantize-then-GEMM path (batches
  // 16 and 64, in slabs of fewer rows than the part: the unit layout's generic decoding) and the
  // one-row kernel; the split Q6_K part dequantizes to the CPU's values exactly.
  void kquant_kernel_matches_cpu_data() {
    QTest::addColumn<int>("type");
    QTest::addColumn<int>("n");
    QTest::addColumn<int>("k");
    QTest::addColumn<bool>("random_bytes");
    for (DType t : {DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kQ4_1, DType::kQ5_0,
                    DType::kQ5_1, DType::kQ2_K, DType::kQ3_K})
      for (auto [n, k] : {std::pair{77, 256}, {33, 2304}, {64, 4096}, {9, 14336}, {45, 576}})
        for (bool rb : {false, true}) {
          const bool super = dtype_info(t).block_size == 256;
          if ((super && k % 256 != 0) || (!rb && (t == DType::kQ2_K || t == DType::kQ3_K)))
            continue;  // whole super-blocks; no quantizer for Q2_K / Q3_K
          QTest::newRow(qPrintable(QString("%1 n=%2 k=%3%4")
                                       .arg(dtype_name(t).data())
                                       .arg(n)
                                       .arg(k)
                                       .arg(rb ? " random bytes" : "")))
              << static_cast<int>(t) << n << k << rb;
        }
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
    for (int64_t m : {1, 2, 3, 5, 8, 16, 64, 256}) {
      expect_linear({&h}, m, m <= 8 ? n : n / 2 + 1, m <= 8 ? 2e-3 : 1e-2, QTest::currentDataTag());
      if (QTest::currentTestFailed()) return;
    }
    h.part.one_row_gemv = true;
    expect_linear({&h}, 3, n, 2e-3, "one-row kernel");
  }

  // Q2_K and Q3_K in their blocks (random blocks: every code, scale and high-bit pattern) at shapes
  // with tails: 5 rows (the one-row kernel's second block has one warp of four busy), odd row
  // counts, one super-block per row (k 256: 8 lanes of a warp busy) and rows longer than a warp's
  // 32 chunks (k 2304); batches 1..256 with odd ones (quant_gemv up to 8, then the dequantize path,
  // in slabs of fewer rows than the part).
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

  // The CUDA weight plan (cuda_weights.h) keeps Q2_K and Q3_K projections stored, alone and beside
  // other formats: in the unit layout (gguf_units.h: the blocks' bytes in three arrays, each
  // 256-byte aligned), or with LATHE_CUDA_GGUF_REPACK=0 in their blocks at their bytes as stored; a
  // K-quant part whose input width is not whole 256-weight blocks is refused by name before any
  // allocation (host checks: no GPU needed).
  void q2_k_and_q3_k_are_planned_stored() {
    std::vector<uint8_t> bytes(64 * 2 * 210, 0);  // enough for every part below
    auto matrix = [&](const char* name, DType t, int64_t n, int64_t k) {
      return plain_matrix(name, make_view(t, {n, k}, bytes.data()));
    };
    // The unit layout's bytes: the blocks' bytes, and under 256 of alignment per array.
    auto units = [&](DType t, int64_t n, int64_t k) {
      const int64_t b = cuda::gguf_units_shape(matrix("x", t, n, k)).bytes();
      const int64_t blocks = n * k / 256 * dtype_info(t).block_bytes;
      if (b < blocks || b >= blocks + 3 * 256) qFatal("unit layout bytes %lld", (long long)b);
      return b;
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
    QCOMPARE(s.value().part_bytes, (std::vector<int64_t>{units(DType::kQ3_K, 64, 512),
                                                         units(DType::kQ2_K, 16, 512), q6}));
    QCOMPARE(s.value().bytes(), units(DType::kQ3_K, 64, 512) + units(DType::kQ2_K, 16, 512) + q6);
    auto blocks = cuda::plan_projection(&g, 96, 512, 2, true, /*gguf_repack=*/false);
    LATHE_QVERIFY_RESULT(blocks);
    QCOMPARE(blocks.value().part_bytes,
             (std::vector<int64_t>{64 * 2 * 110, 16 * 2 * 84, 16 * 2 * 210}));
    for (DType t : {DType::kQ2_K, DType::kQ3_K}) {
      LinearGroup one;
      one.parts = {matrix("blk.0.ffn_down", t, 16, 512)};
      auto p = cuda::plan_projection(&one, 16, 512, 2, true);
      LATHE_QVERIFY_RESULT(p);
      QVERIFY2(p.value().stored, dtype_name(t).data());
      QCOMPARE(p.value().dense_bytes, int64_t{0});
      QCOMPARE(p.value().bytes(), units(t, 16, 512));
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
      qp.gguf_units = true;  // as uploaded
      qp.scales = bytes.data();
      qp.gguf_aux = bytes.data();
      QVERIFY2(cuda::quant_part_supported(qp, &why), why.c_str());
      qp.gguf_units = false;
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
    QCOMPARE(qkv.value().part_bytes,
             (std::vector<int64_t>{units(DType::kQ2_K, 16, 256), units(DType::kQ3_K, 16, 256),
                                   units(DType::kQ2_K, 16, 256)}));
    QCOMPARE(gate_up.value().part_bytes,
             (std::vector<int64_t>{units(DType::kQ3_K, 32, 256), units(DType::kQ2_K, 32, 256)}));
    QCOMPARE(down.value().part_bytes, (std::vector<int64_t>{256 * 34}));
    QVERIFY(!o.value().stored);  // f16: one matrix of the activation dtype
    QCOMPARE(o.value().bytes(), int64_t{256 * 16 * 2});
  }
};

QTEST_GUILESS_MAIN(CudaGgufQuantTest)
#include "cuda_gguf_quant_test.moc"
