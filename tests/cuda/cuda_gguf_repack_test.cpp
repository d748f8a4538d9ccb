// GGUF Q8_0 and Q4_0 parts converted into Lathe's integer row layout at upload
// (engine/backend/cuda/gguf_repack.h), host side: random blocks (every code, finite f16 scales of
// both signs including zero and subnormals) decode through the integer reference decoder
// (weight_dequant.h) to exactly dequant.h's dequantize_row values, the layout's bytes are the
// blocks' (8.5 and 4.5 bits per weight), the plan takes the new shape only where the switch is on,
// and what the conversion cannot take is refused with the tensor's name; Q6_K parts are split into
// 16-byte aligned slots and their d. No GPU needed.
#include <QtTest>

#include <cmath>
#include <cstring>
#include <random>

#include "engine/backend/cuda/cuda_weights.h"
#include "engine/backend/cuda/gguf_repack.h"
#include "engine/core/half.h"
#include "engine/model/dequant.h"
#include "engine/model/layer_weights.h"
#include "engine/model/weight_dequant.h"
#include "test_support.h"

using namespace lathe;
using namespace lathe::cuda;

namespace {

// [n, k] blocks of `type` (q8_0 or q4_0): random quant bytes, and each block's f16 d a random
// finite half (any sign, zero and subnormals included; no inf or NaN, whose products are not
// comparable bit for bit).
std::vector<uint8_t> random_blocks(DType type, int64_t n, int64_t k, uint32_t seed) {
  const int64_t bb = dtype_info(type).block_bytes, blocks = n * k / 32;
  std::vector<uint8_t> b(static_cast<size_t>(blocks * bb));
  std::mt19937 rng(seed);
  for (uint8_t& x : b) x = static_cast<uint8_t>(rng() & 0xFF);
  for (int64_t i = 0; i < blocks; ++i) {
    uint16_t d = 0;
    do d = static_cast<uint16_t>(rng() & 0xFFFF);
    while ((d & 0x7C00) == 0x7C00);
    std::memcpy(&b[static_cast<size_t>(i * bb)], &d, 2);
  }
  return b;
}

std::vector<float> reference(DType type, const std::vector<uint8_t>& blocks, int64_t n, int64_t k) {
  std::vector<float> w(static_cast<size_t>(n * k));
  const int64_t row_bytes = k / 32 * dtype_info(type).block_bytes;
  for (int64_t r = 0; r < n; ++r)
    dequantize_row(type, blocks.data() + r * row_bytes, w.data() + r * k, k);
  return w;
}

}  // namespace

class CudaGgufRepackTest : public QObject {
  Q_OBJECT
 private slots:
  void decodes_to_the_cpu_values_data() {
    QTest::addColumn<int>("type");
    QTest::addColumn<int>("n");
    QTest::addColumn<int>("k");
    for (DType t : {DType::kQ8_0, DType::kQ4_0}) {
      const QByteArray name(dtype_name(t).data());
      QTest::newRow(name + " 7x96") << static_cast<int>(t) << 7 << 96;
      QTest::newRow(name + " 33x4096") << static_cast<int>(t) << 33 << 4096;
      QTest::newRow(name + " 1x32") << static_cast<int>(t) << 1 << 32;
    }
  }
  void decodes_to_the_cpu_values() {
    QFETCH(int, type);
    QFETCH(int, n);
    QFETCH(int, k);
    const DType t = static_cast<DType>(type);
    const std::vector<uint8_t> blocks = random_blocks(t, n, k, 17 * n + k + type);
    const WeightMatrix m = plain_matrix("blk.0.attn_q", make_view(t, {n, k}, blocks.data()));
    QVERIFY(gguf_repacks(m));
    const RepackShape s = gguf_repack_shape(m);
    QCOMPARE(s.bits, t == DType::kQ8_0 ? 8 : 4);
    QCOMPARE(s.group_size, 32);
    QCOMPARE(s.scale_dtype, DType::kF16);
    QVERIFY(!s.has_zeros && !s.has_g_idx && !s.int4_tiles);
    // The same bytes as the blocks: 8.5 / 4.5 bits per weight.
    QCOMPARE(s.data_bytes + s.scale_bytes, m.data.nbytes());
    auto r = gguf_repack(m);
    LATHE_QVERIFY_RESULT(r);
    QCOMPARE(static_cast<int64_t>(r.value().data.size()), s.data_bytes);
    QCOMPARE(static_cast<int64_t>(r.value().scales.size()), s.scale_bytes);
    const WeightMatrix im = gguf_repacked_matrix(m, r.value());
    LATHE_QVERIFY_OK(validate_weight_matrix(im));
    const std::vector<float> got = dequantize_matrix(im);
    const std::vector<float> want = reference(t, blocks, n, k);
    QCOMPARE(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      if (std::memcmp(&got[i], &want[i], 4) != 0)
        QFAIL(qPrintable(QString("weight %1 (row %2, input %3): %4 from the row layout, %5 from "
                                 "the blocks")
                             .arg(i)
                             .arg(static_cast<qlonglong>(i) / k)
                             .arg(static_cast<qlonglong>(i) % k)
                             .arg(got[i], 0, 'g', 9)
                             .arg(want[i], 0, 'g', 9)));
  }

  // The layout itself, on one hand-made block each (independent of the reference decoder):
  // Q8_0 code = q + 128; Q4_0 element j in nibble j % 8 of word j / 8.
  void layout_of_one_block() {
    std::vector<uint8_t> q8(34), q4(18);
    const uint16_t d = f32_to_f16(0.5f);
    std::memcpy(q8.data(), &d, 2);
    std::memcpy(q4.data(), &d, 2);
    for (int j = 0; j < 32; ++j) q8[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(j - 16));
    for (int j = 0; j < 16; ++j) q4[2 + j] = static_cast<uint8_t>((j & 15) | ((15 - j) << 4));
    auto r8 = gguf_repack(plain_matrix("a", make_view(DType::kQ8_0, {1, 32}, q8.data())));
    auto r4 = gguf_repack(plain_matrix("b", make_view(DType::kQ4_0, {1, 32}, q4.data())));
    LATHE_QVERIFY_RESULT(r8);
    LATHE_QVERIFY_RESULT(r4);
    for (int j = 0; j < 32; ++j)
      QCOMPARE(int{r8.value().data[static_cast<size_t>(j)]}, j - 16 + 128);
    uint32_t words[4];
    std::memcpy(words, r4.value().data.data(), 16);
    for (int j = 0; j < 32; ++j) {
      const uint32_t code = (words[j / 8] >> (4 * (j % 8))) & 15u;
      const uint32_t want =
          j < 16 ? static_cast<uint32_t>(j) : static_cast<uint32_t>(15 - (j - 16));
      QCOMPARE(code, want);
    }
    for (const auto* r : {&r8.value(), &r4.value()}) {
      uint16_t s = 0;
      std::memcpy(&s, r->scales.data(), 2);
      QCOMPARE(s, d);
    }
  }

  // Other types keep their blocks; a part without host bytes (a dummy's), or whose bytes do not
  // match its shape, or of another type, is refused naming the tensor.
  void what_is_not_converted() {
    std::vector<uint8_t> bytes(4096, 0);
    for (DType t : {DType::kQ4_1, DType::kQ5_0, DType::kQ4_K, DType::kQ6_K, DType::kBF16}) {
      const WeightMatrix m = plain_matrix("blk.2.ffn_down", make_view(t, {2, 256}, bytes.data()));
      QVERIFY2(!gguf_repacks(m), dtype_name(t).data());
      auto r = gguf_repack(m);
      QCOMPARE(r.status().code(), ErrorCode::kInvalidArgument);
      QVERIFY2(r.status().message().find("blk.2.ffn_down") != std::string::npos &&
                   r.status().message().find("q8_0 and q4_0") != std::string::npos,
               r.status().message().c_str());
    }
    WeightMatrix dummy = plain_matrix("output", make_view(DType::kQ8_0, {2, 64}, nullptr));
    QVERIFY(gguf_repacks(dummy));
    auto r = gguf_repack(dummy);
    QCOMPARE(r.status().code(), ErrorCode::kInvalidArgument);
    QVERIFY2(r.status().message().find("output: no host blocks") != std::string::npos,
             r.status().message().c_str());
    WeightMatrix short_view =
        plain_matrix("blk.0.attn_k", make_view(DType::kQ4_0, {2, 64}, bytes.data()));
    short_view.data.shape[0] = 1;  // bytes of one row for a two-row matrix
    r = gguf_repack(short_view);
    QCOMPARE(r.status().code(), ErrorCode::kInvalidArgument);
    QVERIFY2(r.status().message().find("blk.0.attn_k: 36 bytes of blocks, expected 72") !=
                 std::string::npos,
             r.status().message().c_str());
  }

  // The weight plan: Q8_0 / Q4_0 parts take the row layout's bytes (codes | scales, each piece
  // 256-byte aligned) where gguf_repack is on, the blocks' bytes where it is off; other GGUF types
  // and dense parts are planned as before.
  void plan_takes_the_new_shape() {
    std::vector<uint8_t> bytes(1 << 16, 0);
    auto matrix = [&](const char* name, DType t, int64_t n, int64_t k) {
      return plain_matrix(name, make_view(t, {n, k}, bytes.data()));
    };
    LinearGroup g;
    g.parts = {matrix("blk.0.attn_q", DType::kQ8_0, 40, 96),
               matrix("blk.0.attn_k", DType::kQ4_0, 24, 96)};
    auto on = plan_projection(&g, 64, 96, 2, true, true);
    auto off = plan_projection(&g, 64, 96, 2, true, false);
    LATHE_QVERIFY_RESULT(on);
    LATHE_QVERIFY_RESULT(off);
    auto aligned = [](int64_t v) { return (v + 255) / 256 * 256; };
    QCOMPARE(on.value().part_bytes,
             (std::vector<int64_t>{aligned(40 * 96) + aligned(40 * 3 * 2),
                                   aligned(24 * 96 / 2) + aligned(24 * 3 * 2)}));
    QCOMPARE(off.value().part_bytes, (std::vector<int64_t>{40 * 3 * 34, 24 * 3 * 18}));
    LinearGroup k6;
    k6.parts = {matrix("blk.0.ffn_down", DType::kQ6_K, 16, 256)};
    auto q6 = plan_projection(&k6, 16, 256, 2, true, true);
    LATHE_QVERIFY_RESULT(q6);
    QCOMPARE(q6.value().part_bytes, (std::vector<int64_t>{aligned(16 * 208) + aligned(16 * 2)}));
    auto q6_off = plan_projection(&k6, 16, 256, 2, true, false);
    LATHE_QVERIFY_RESULT(q6_off);
    QCOMPARE(q6_off.value().part_bytes, (std::vector<int64_t>{16 * 210}));
  }

  // Q5_K's high bits in unit order (gguf_repack.h): the 8 bytes of unit c hold bits 2 c, 2 c + 1
  // of every weight's qh byte, where the decoder looks for them; the reorder is a permutation of
  // bits (round trip exact, the rest of the block unchanged). Refusals as the split's.
  void q5k_unit_order_moves_the_bits() {
    const int64_t n = 2, k = 512, blocks = n * k / 256;
    std::vector<uint8_t> b(static_cast<size_t>(blocks * 176));
    std::mt19937 rng(11);
    for (uint8_t& x : b) x = static_cast<uint8_t>(rng() & 0xFF);
    const WeightMatrix m = plain_matrix("blk.2.ffn_up", make_view(DType::kQ5_K, {n, k}, b.data()));
    QVERIFY(gguf_reorders_q5k(m));
    auto r = gguf_reorder_q5k(m);
    LATHE_QVERIFY_RESULT(r);
    QCOMPARE(static_cast<int64_t>(r.value().data.size()), blocks * 176);
    for (int64_t i = 0; i < blocks; ++i) {
      const uint8_t* src = b.data() + i * 176;
      const uint8_t* dst = r.value().data.data() + i * 176;
      QVERIFY(std::memcmp(dst, src, 16) == 0);
      QVERIFY(std::memcmp(dst + 48, src + 48, 128) == 0);
      for (int sub = 0; sub < 8; ++sub)
        for (int l = 0; l < 32; ++l) {
          const int want = (src[16 + l] >> sub) & 1;
          const int got = (dst[16 + 8 * (sub >> 1) + (l & 7)] >>
                           ((sub & 1) + 4 * ((l >> 3) & 1) + 2 * (l >> 4))) &
                          1;
          QVERIFY2(got == want,
                   qPrintable(QString("block %1 sub %2 weight %3").arg(i).arg(sub).arg(l)));
        }
      uint8_t back[32];
      q5k_qh_from_units(dst + 16, back);
      QVERIFY(std::memcmp(back, src + 16, 32) == 0);
    }
    const WeightMatrix q6 =
        plain_matrix("blk.2.attn_v", make_view(DType::kQ6_K, {1, 256}, b.data()));
    QVERIFY(!gguf_reorders_q5k(q6));
    QCOMPARE(gguf_reorder_q5k(q6).status().code(), ErrorCode::kInvalidArgument);
    const auto none =
        gguf_reorder_q5k(plain_matrix("output", make_view(DType::kQ5_K, {2, 256}, nullptr)));
    QVERIFY2(none.status().message().find("no host blocks") != std::string::npos,
             none.status().message().c_str());
  }

  // Q6_K parts are split at upload (gguf_repack.h): each block's first 208 bytes (ql, qh, scales)
  // into its slot, its f16 d into the array after them, the same 210 bytes per block, moved
  // exactly. Another type, a part without host bytes (a dummy's) or with too few is refused naming
  // the tensor.
  void q6k_split_moves_the_blocks() {
    const int64_t n = 3, k = 512, blocks = n * k / 256;
    std::vector<uint8_t> b(static_cast<size_t>(blocks * 210));
    std::mt19937 rng(7);
    for (uint8_t& x : b) x = static_cast<uint8_t>(rng() & 0xFF);
    const WeightMatrix m =
        plain_matrix("blk.1.ffn_down", make_view(DType::kQ6_K, {n, k}, b.data()));
    QVERIFY(gguf_splits_q6k(m));
    const RepackShape s = gguf_q6k_split_shape(m);
    QCOMPARE(s.data_bytes, blocks * 208);
    QCOMPARE(s.scale_bytes, blocks * 2);
    auto r = gguf_split_q6k(m);
    LATHE_QVERIFY_RESULT(r);
    QCOMPARE(static_cast<int64_t>(r.value().data.size()), blocks * 208);
    QCOMPARE(static_cast<int64_t>(r.value().scales.size()), blocks * 2);
    for (int64_t i = 0; i < blocks; ++i) {
      QVERIFY(std::memcmp(r.value().data.data() + i * 208, b.data() + i * 210, 208) == 0);
      QVERIFY(std::memcmp(r.value().scales.data() + i * 2, b.data() + i * 210 + 208, 2) == 0);
    }
    auto refused = [](const WeightMatrix& w, const char* says) {
      auto bad = gguf_split_q6k(w);
      QCOMPARE(bad.status().code(), ErrorCode::kInvalidArgument);
      QVERIFY2(bad.status().message().find(w.name) != std::string::npos &&
                   bad.status().message().find(says) != std::string::npos,
               bad.status().message().c_str());
    };
    const WeightMatrix q4 =
        plain_matrix("blk.1.attn_q", make_view(DType::kQ4_K, {2, 256}, b.data()));
    QVERIFY(!gguf_splits_q6k(q4));
    refused(q4, "only GGUF q6_k parts");
    refused(plain_matrix("output", make_view(DType::kQ6_K, {2, 256}, nullptr)), "no host blocks");
    WeightMatrix short_view =
        plain_matrix("blk.0.attn_v", make_view(DType::kQ6_K, {2, 256}, b.data()));
    short_view.data.shape[0] = 1;
    refused(short_view, "210 bytes of blocks, expected 420");
  }
};

QTEST_GUILESS_MAIN(CudaGgufRepackTest)
#include "cuda_gguf_repack_test.moc"
