// Linear layers on stored formats (quant_linear.h, linear.h's stored path) against the CPU
// reference: 4- and 8-bit integer codes (group and channel scales, zero points, act-order g_idx;
// the row and tile layouts, the W4A16 GEMM), FP8 with per-tensor / per-channel / block scales, and
// projections of several parts in different formats, at batch sizes 1, 2, 4, 8 (quant_gemv), 16,
// 64 and 256 (the dequantize-then-GEMM path, also in slabs), with odd output counts. The GGUF block
// types have their own file (cuda_gguf_quant_test.cpp).
#include <QtTest>

#include "quant_host_parts.h"

using namespace lathe;
using namespace lathe::test;

class CudaQuantTest : public QObject {
  Q_OBJECT
 private slots:
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
