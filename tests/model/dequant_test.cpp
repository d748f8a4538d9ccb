// Dequantization parity: for each supported type, random blocks (tests/fixtures/model/dequant/,
// made by scripts/fixtures/make_model_loader_fixtures.py; q2_k and q3_k by
// scripts/fixtures/make_quant_format_fixtures.py) dequantize to exactly the float32 values
// the Python gguf package gives for the same bytes.
#include <QtTest>

#include <cmath>
#include <cstring>
#include <vector>

#include "engine/core/half.h"
#include "engine/model/dequant.h"
#include "model_test_files.h"
#include "test_support.h"

using namespace lathe;

namespace {

std::vector<float> read_floats(const std::string& path) {
  const std::vector<uint8_t> bytes = lathe::test::read_file_bytes(path);
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

}  // namespace

class DequantTest : public QObject {
  Q_OBJECT
 private slots:
  void matches_gguf_python_data() {
    QTest::addColumn<int>("type");
    QTest::addColumn<QString>("name");
    const std::pair<DType, const char*> types[] = {
        {DType::kF16, "f16"},   {DType::kBF16, "bf16"}, {DType::kQ8_0, "q8_0"},
        {DType::kQ4_0, "q4_0"}, {DType::kQ4_1, "q4_1"}, {DType::kQ5_0, "q5_0"},
        {DType::kQ5_1, "q5_1"}, {DType::kQ4_K, "q4_k"}, {DType::kQ5_K, "q5_k"},
        {DType::kQ6_K, "q6_k"}, {DType::kQ2_K, "q2_k"}, {DType::kQ3_K, "q3_k"},
    };
    for (const auto& [t, n] : types) QTest::newRow(n) << static_cast<int>(t) << QString(n);
  }

  void matches_gguf_python() {
    QFETCH(int, type);
    QFETCH(QString, name);
    const DType t = static_cast<DType>(type);
    const std::string base = lathe::test::fixture_path("model/dequant/" + name.toStdString());
    const std::vector<uint8_t> raw = lathe::test::read_file_bytes(base + ".bin");
    const std::vector<float> want = read_floats(base + ".f32");
    QVERIFY(!want.empty());
    const int64_t n = static_cast<int64_t>(want.size());
    QCOMPARE(static_cast<int64_t>(raw.size()), *dtype_bytes(t, n));
    QVERIFY(can_dequantize(t));

    std::vector<float> got(want.size(), std::nanf(""));
    dequantize_row(t, raw.data(), got.data(), n);
    int64_t exact = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float a = got[static_cast<size_t>(i)], b = want[static_cast<size_t>(i)];
      if (a == b) {
        ++exact;
        continue;
      }
      // Allowed: 1e-6 relative (e.g. a compiler contracting d*q + m into one FMA).
      QVERIFY2(std::fabs(a - b) <= 1e-6f * std::max(std::fabs(b), 1e-3f),
               qPrintable(QString("%1: element %2 is %3, gguf gives %4")
                              .arg(name)
                              .arg(i)
                              .arg(a, 0, 'g', 9)
                              .arg(b, 0, 'g', 9)));
    }
    QVERIFY(exact > n * 9 / 10);

    // A block at an odd address (GGUF rows are not aligned for the CPU's convenience).
    std::vector<uint8_t> shifted(raw.size() + 1);
    std::memcpy(shifted.data() + 1, raw.data(), raw.size());
    std::vector<float> got2(want.size());
    dequantize_row(t, shifted.data() + 1, got2.data(), n);
    QVERIFY(std::memcmp(got.data(), got2.data(), got.size() * 4) == 0);
  }

  void f16_conversion_matches_core_for_every_half() {
    std::vector<uint16_t> all(65536);
    for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
    std::vector<float> got(65536);
    dequantize_row(DType::kF16, all.data(), got.data(), 65536);
    for (uint32_t i = 0; i < 65536; ++i) {
      const float want = f16_to_f32(all[i]);
      if (std::isnan(want)) {
        QVERIFY(std::isnan(got[i]));
        continue;
      }
      QVERIFY2(std::memcmp(&want, &got[i], 4) == 0,
               qPrintable(QString("half 0x%1").arg(i, 4, 16, QChar('0'))));
    }
  }

  void q4_0_layout_by_hand() {
    // d = 0.5; byte j holds weight j (low nibble) and weight j + 16 (high nibble); x = d * (q - 8).
    uint8_t block[18];
    const uint16_t d = f32_to_f16(0.5f);
    std::memcpy(block, &d, 2);
    for (int j = 0; j < 16; ++j) block[2 + j] = static_cast<uint8_t>((15 - j) << 4 | j);
    float x[32];
    dequantize_row(DType::kQ4_0, block, x, 32);
    QCOMPARE(x[0], -4.0f);   // (0 - 8) / 2
    QCOMPARE(x[15], 3.5f);   // (15 - 8) / 2
    QCOMPARE(x[16], 3.5f);   // high nibble of byte 0: 15
    QCOMPARE(x[31], -4.0f);  // high nibble of byte 15: 0
  }

  void q8_0_and_q6_k_signs_by_hand() {
    uint8_t q8[34] = {};
    const uint16_t d = f32_to_f16(0.25f);
    std::memcpy(q8, &d, 2);
    q8[2] = static_cast<uint8_t>(-128);
    q8[33] = 127;
    float x[256];
    dequantize_row(DType::kQ8_0, q8, x, 32);
    QCOMPARE(x[0], -32.0f);
    QCOMPARE(x[31], 31.75f);
    QCOMPARE(x[1], 0.0f);

    // Q6_K: all 6-bit values 0 (-> -32), scale of sub-block 0 = -2, d = 1: x = 1 * -2 * -32 = 64.
    uint8_t q6[210] = {};
    reinterpret_cast<int8_t*>(q6 + 192)[0] = -2;
    const uint16_t one = f32_to_f16(1.0f);
    std::memcpy(q6 + 208, &one, 2);
    dequantize_row(DType::kQ6_K, q6, x, 256);
    QCOMPARE(x[0], 64.0f);
    QCOMPARE(x[15], 64.0f);
    QCOMPARE(x[16], 0.0f);  // sub-block 1 has scale 0
  }

  void whole_tensor_matches_rows() {
    // A 3 x 256 q4_K tensor from the fixture bytes: dequantize_tensor == row by row.
    const std::string base = lathe::test::fixture_path("model/dequant/q4_k");
    const std::vector<uint8_t> raw = lathe::test::read_file_bytes(base + ".bin");
    const std::vector<float> want = read_floats(base + ".f32");
    const TensorView t = make_view(DType::kQ4_K, {3, 256}, raw.data());
    QCOMPARE(t.nbytes(), static_cast<int64_t>(raw.size()));
    std::vector<float> all(768);
    LATHE_QVERIFY_OK(dequantize_tensor(t, all.data()));
    QVERIFY(std::memcmp(all.data(), want.data(), all.size() * 4) == 0);
    std::vector<float> row1(256);
    dequantize_rows(t, 1, 2, row1.data());
    QVERIFY(std::memcmp(row1.data(), want.data() + 256, 256 * 4) == 0);
  }

  void unsupported_types_are_reported() {
    QVERIFY(!can_dequantize(DType::kI8));
    QVERIFY(!can_dequantize(DType::kF8E4M3));
    int8_t data[4] = {1, 2, 3, 4};
    float out[4];
    const Status s = dequantize_tensor(make_view(DType::kI8, {4}, data), out);
    QCOMPARE(s.code(), ErrorCode::kUnsupported);
    QVERIFY(s.message().find("i8") != std::string::npos);
  }
};

QTEST_GUILESS_MAIN(DequantTest)
#include "dequant_test.moc"
