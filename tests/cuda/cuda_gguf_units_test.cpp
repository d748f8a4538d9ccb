// The unit layout of GGUF Q4_1, Q5_0, Q5_1, Q2_K and Q3_K parts (engine/backend/cuda/gguf_units.h),
// host side: random blocks go into the three arrays and back unchanged (every byte), the arrays
// hold the blocks' bytes and no more, each weight's code and high bit land where the header says
// (one weight set at a time, from the GGUF definition of the block), and what the layout cannot
// take is refused with the tensor's name. The kernels reading the layout are tested against the CPU
// in test_cuda_gguf_quant. No GPU needed.
#include <QtTest>

#include <random>

#include "engine/backend/cuda/gguf_units.h"
#include "engine/model/layer_weights.h"
#include "test_support.h"

using namespace lathe;
using namespace lathe::cuda;

namespace {

const DType kTypes[] = {DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ2_K, DType::kQ3_K};

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::vector<uint8_t> b(n);
  std::mt19937 rng(seed);
  for (uint8_t& x : b) x = static_cast<uint8_t>(rng() & 0xFF);
  return b;
}

int get_bit(const uint8_t* p, int i) {
  return (p[i / 8] >> (i % 8)) & 1;
}

// Converts one block of `type` and returns the indices of the set bits of its data and aux pieces
// (aux bits after 8 * data bytes).
std::vector<int> set_unit_bits(DType type, const std::vector<uint8_t>& block) {
  const GgufUnitPieces p = gguf_unit_pieces(type);
  std::vector<uint8_t> data(static_cast<size_t>(p.data)), scales(static_cast<size_t>(p.scales)),
      aux(static_cast<size_t>(p.aux));
  gguf_block_to_units(type, block.data(), data.data(), scales.data(), aux.data());
  std::vector<int> bits;
  for (int i = 0; i < 8 * p.data; ++i)
    if (get_bit(data.data(), i)) bits.push_back(i);
  for (int i = 0; i < 8 * p.aux; ++i)
    if (get_bit(aux.data(), i)) bits.push_back(8 * p.data + i);
  return bits;
}

}  // namespace

class CudaGgufUnitsTest : public QObject {
  Q_OBJECT
 private slots:
  void pieces_are_the_blocks_bytes() {
    for (DType t : kTypes) {
      const GgufUnitPieces p = gguf_unit_pieces(t);
      QCOMPARE(static_cast<int64_t>(p.data + p.scales + p.aux), dtype_info(t).block_bytes);
      const WeightMatrix m = plain_matrix("blk.0.attn_q", make_view(t, {3, 512}, nullptr));
      QVERIFY(gguf_takes_units(m));
      const RepackShape s = gguf_units_shape(m);
      QCOMPARE(s.data_bytes + s.scale_bytes + s.zero_bytes,
               3 * 512 / dtype_info(t).block_size * dtype_info(t).block_bytes);
      QCOMPARE(s.has_zeros, p.aux > 0);
    }
  }

  void blocks_round_trip() {
    for (DType t : kTypes) {
      const int64_t n = 5, k = 768, bb = dtype_info(t).block_bytes;
      const int64_t blocks = n * k / dtype_info(t).block_size;
      const std::vector<uint8_t> file =
          random_bytes(static_cast<size_t>(blocks * bb), 3 + static_cast<uint32_t>(t));
      const WeightMatrix m = plain_matrix("blk.2.ffn_up", make_view(t, {n, k}, file.data()));
      auto r = gguf_to_units(m);
      LATHE_QVERIFY_RESULT(r);
      const GgufUnitPieces p = gguf_unit_pieces(t);
      std::vector<uint8_t> back(file.size());
      for (int64_t b = 0; b < blocks; ++b)
        gguf_block_from_units(
            t, r.value().data.data() + b * p.data, r.value().scales.data() + b * p.scales,
            p.aux > 0 ? r.value().zeros.data() + b * p.aux : nullptr, back.data() + b * bb);
      QVERIFY2(back == file, dtype_name(t).data());
      // The scales are the blocks' d (m, dmin) bytes as they are.
      QVERIFY(std::equal(r.value().scales.begin(), r.value().scales.begin() + p.scales,
                         file.begin() + p.scales_from));
    }
  }

  // One weight t at a time (GGUF's definition of the block: dequant.cpp), its code all ones and its
  // high bit set: exactly those bits are set in the unit layout, where gguf_units.h places them.
  void each_weight_lands_where_the_header_says() {
    // Q4_1 / Q5_0 / Q5_1: weight t (< 32) of a block: nibble of qs[t % 16] (high for t >= 16);
    // Q5: its high bit at qh bit t, which goes to bit 8 e + 2 i + s (t = 4 i + e + 16 s).
    for (DType t : {DType::kQ4_1, DType::kQ5_0, DType::kQ5_1}) {
      const GgufUnitPieces p = gguf_unit_pieces(t);
      for (int w = 0; w < 32; ++w) {
        std::vector<uint8_t> block(static_cast<size_t>(dtype_info(t).block_bytes), 0);
        block[static_cast<size_t>(p.data_from + w % 16)] =
            static_cast<uint8_t>(w < 16 ? 0x0F : 0xF0);
        if (t != DType::kQ4_1)
          block[static_cast<size_t>(p.aux_from + w / 8)] = static_cast<uint8_t>(1 << (w % 8));
        std::vector<int> want;
        for (int b = 0; b < 4; ++b) want.push_back(8 * (w % 16) + (w < 16 ? 0 : 4) + b);
        const int s = w / 16, i = (w % 16) / 4, e = w % 4;
        if (t != DType::kQ4_1) want.push_back(8 * p.data + 8 * e + 2 * i + s);
        QCOMPARE(set_unit_bits(t, block), want);
      }
    }
    // Q2_K / Q3_K: weight t (< 256): its 2-bit code at bits 2 j of qs[32 h + l] (t = 128 h + 32 j +
    // l), which goes to bits 2 s of qs' byte 16 c + 4 i + e (t = 64 c + 16 s + 4 i + e); Q3_K: its
    // high bit at bit t / 32 of hmask[t % 32], which goes to bit 4 (s % 2) + i of hmask' byte
    // 8 c + 4 (s / 2) + e.
    for (DType t : {DType::kQ2_K, DType::kQ3_K}) {
      const int qs_at = t == DType::kQ2_K ? 16 : 32;  // in the block and in the data piece
      for (int w = 0; w < 256; ++w) {
        std::vector<uint8_t> block(static_cast<size_t>(dtype_info(t).block_bytes), 0);
        const int h = w / 128, j = (w % 128) / 32, l = w % 32;
        block[static_cast<size_t>(qs_at + 32 * h + l)] = static_cast<uint8_t>(3 << (2 * j));
        if (t == DType::kQ3_K)
          block[static_cast<size_t>(w % 32)] = static_cast<uint8_t>(1 << (w / 32));
        const int c = w / 64, s = (w % 64) / 16, i = (w % 16) / 4, e = w % 4;
        std::vector<int> want;
        if (t == DType::kQ3_K) want.push_back(8 * (8 * c + 4 * (s / 2) + e) + 4 * (s % 2) + i);
        const int code = 8 * (qs_at + 16 * c + 4 * i + e) + 2 * s;
        want.push_back(code);
        want.push_back(code + 1);
        QCOMPARE(set_unit_bits(t, block), want);
      }
    }
  }

  void what_the_layout_does_not_take() {
    std::vector<uint8_t> bytes(16 * 110, 0);
    // Not whole 64-weight units, or a type with its own layout: the blocks stay as they are.
    QVERIFY(!gguf_takes_units(plain_matrix("a", make_view(DType::kQ4_1, {1, 288}, bytes.data()))));
    QVERIFY(gguf_takes_units(plain_matrix("a", make_view(DType::kQ5_1, {1, 576}, bytes.data()))));
    QVERIFY(!gguf_takes_units(plain_matrix("a", make_view(DType::kQ4_K, {1, 256}, bytes.data()))));
    QVERIFY(!gguf_takes_units(plain_matrix("a", make_view(DType::kQ4_0, {1, 256}, bytes.data()))));
    auto wrong_type = gguf_to_units(
        plain_matrix("blk.4.attn_q", make_view(DType::kQ4_K, {1, 256}, bytes.data())));
    QCOMPARE(wrong_type.status().code(), ErrorCode::kInvalidArgument);
    QVERIFY2(wrong_type.status().message().find("blk.4.attn_q") != std::string::npos,
             wrong_type.status().message().c_str());
    // A dummy part (no host bytes) is filled on the device, never converted.
    auto dummy =
        gguf_to_units(plain_matrix("blk.5.ffn_down", make_view(DType::kQ3_K, {2, 256}, nullptr)));
    QCOMPARE(dummy.status().code(), ErrorCode::kInvalidArgument);
    QVERIFY2(dummy.status().message().find("blk.5.ffn_down") != std::string::npos &&
                 dummy.status().message().find("no host blocks") != std::string::npos,
             dummy.status().message().c_str());
  }
};

QTEST_GUILESS_MAIN(CudaGgufUnitsTest)
#include "cuda_gguf_units_test.moc"
