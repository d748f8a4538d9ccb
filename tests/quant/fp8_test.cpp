// FP8 E4M3 (engine/quant/fp8.h): the decoder against a table of known codes, the encoder as its
// inverse on every finite code, rounding ties to even (normal and subnormal), saturation at 448,
// NaN; and weight quantization with per-tensor, per-channel and 128x128 block scales.
#include <QtTest>

#include <cmath>
#include <limits>
#include <vector>

#include "engine/quant/fp8.h"
#include "quant_test_util.h"

using namespace lathe;

class Fp8Test : public QObject {
  Q_OBJECT
 private slots:
  void decoder_table() {
    const std::pair<uint8_t, float> known[] = {
        {0x00, 0.f},   {0x80, -0.f}, {0x01, 0x1p-9f}, {0x07, 7 * 0x1p-9f}, {0x08, 0x1p-6f},
        {0x38, 1.f},   {0x3c, 1.5f}, {0x40, 2.f},     {0x7e, 448.f},       {0xfe, -448.f},
        {0x77, 240.f}, {0xb8, -1.f}, {0x30, 0.5f},    {0x39, 1.125f},      {0x0f, 0x1p-6f * 1.875f},
    };
    for (const auto& [code, value] : known) {
      QCOMPARE(e4m3_to_f32(code), value);
      QCOMPARE(std::signbit(e4m3_to_f32(code)), std::signbit(value));
    }
    QVERIFY(std::isnan(e4m3_to_f32(0x7f)));
    QVERIFY(std::isnan(e4m3_to_f32(0xff)));
  }

  void encoder_inverts_every_finite_code() {
    for (int c = 0; c < 256; ++c) {
      if ((c & 0x7f) == 0x7f) continue;
      const float v = e4m3_to_f32(static_cast<uint8_t>(c));
      QCOMPARE(int(f32_to_e4m3(v)), c);
    }
  }

  void rounds_to_nearest_even_and_saturates() {
    // Between 1.0 (0x38) and 1.125 (0x39): below, at and above the midpoint.
    QCOMPARE(int(f32_to_e4m3(1.0625f)), 0x38);  // tie -> even mantissa 0
    QCOMPARE(int(f32_to_e4m3(1.0626f)), 0x39);
    QCOMPARE(int(f32_to_e4m3(1.1875f)), 0x3a);  // tie between 1.125 (odd) and 1.25 -> 1.25
    QCOMPARE(int(f32_to_e4m3(1.99f)), 0x40);    // rounds up into the next binade
    // Subnormals: multiples of 2^-9, ties to even.
    QCOMPARE(int(f32_to_e4m3(0.5f * 0x1p-9f)), 0x00);
    QCOMPARE(int(f32_to_e4m3(0.51f * 0x1p-9f)), 0x01);
    QCOMPARE(int(f32_to_e4m3(1.5f * 0x1p-9f)), 0x02);
    QCOMPARE(int(f32_to_e4m3(7.5f * 0x1p-9f)), 0x08);  // up into the smallest normal
    QCOMPARE(int(f32_to_e4m3(-3 * 0x1p-9f)), 0x83);
    // Saturation at +-448, infinities included; NaN stays NaN.
    QCOMPARE(int(f32_to_e4m3(448.f)), 0x7e);
    QCOMPARE(int(f32_to_e4m3(460.f)), 0x7e);
    QCOMPARE(int(f32_to_e4m3(1e9f)), 0x7e);
    QCOMPARE(int(f32_to_e4m3(-std::numeric_limits<float>::infinity())), 0xfe);
    QCOMPARE(int(f32_to_e4m3(std::nanf(""))), 0x7f);
    // Nearest in general: random values land on the closer neighbour.
    std::vector<float> v = test::random_normal(10000, 11, 50.f);
    for (float x : v) {
      const float y = e4m3_to_f32(f32_to_e4m3(x));
      if (std::fabs(x) >= 448.f) continue;
      const float step = std::fabs(x) < 0x1p-6f ? 0x1p-9f : std::ldexp(1.f, std::ilogb(x) - 3);
      QVERIFY2(std::fabs(y - x) <= step / 2, qPrintable(QString("%1 -> %2").arg(x).arg(y)));
    }
  }

  void scales_per_tensor_channel_and_block_data() {
    QTest::addColumn<int>("kind");
    QTest::newRow("tensor") << int(Fp8ScaleKind::kTensor);
    QTest::newRow("channel") << int(Fp8ScaleKind::kChannel);
    QTest::newRow("block") << int(Fp8ScaleKind::kBlock);
  }
  void scales_per_tensor_channel_and_block() {
    QFETCH(int, kind);
    const Fp8ScaleKind k = static_cast<Fp8ScaleKind>(kind);
    const int64_t rows = 200, cols = 300;  // not multiples of 128: partial blocks
    std::vector<float> w = test::random_normal(rows * cols, 5, 0.02f);
    for (int64_t r = 0; r < rows; ++r) w[static_cast<size_t>(r * cols)] *= float(1 + r % 7);
    std::fill(w.begin() + 150 * cols, w.begin() + 151 * cols, 0.f);  // an all-zero row
    const Fp8Matrix m = quantize_fp8(w.data(), rows, cols, k);
    const int64_t sr = k == Fp8ScaleKind::kTensor ? 1 : k == Fp8ScaleKind::kChannel ? rows : 2;
    const int64_t sc = k == Fp8ScaleKind::kBlock ? 3 : 1;
    QCOMPARE(m.scale_rows(), sr);
    QCOMPARE(m.scale_cols(), sc);
    QCOMPARE(static_cast<int64_t>(m.scales.size()), sr * sc);
    // Every scale is amax / 448 of its region: the region's largest code is +-448.
    std::vector<float> amax(m.scales.size(), 0.f);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const size_t s = k == Fp8ScaleKind::kTensor    ? 0
                         : k == Fp8ScaleKind::kChannel ? size_t(r)
                                                       : size_t((r / 128) * sc + c / 128);
        amax[s] = std::max(amax[s], std::fabs(w[static_cast<size_t>(r * cols + c)]));
      }
    for (size_t s = 0; s < amax.size(); ++s)
      QCOMPARE(m.scales[s], amax[s] > 0 ? amax[s] / 448.f : 1.f);
    const std::vector<float> back = dequantize_fp8(m);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const float x = w[static_cast<size_t>(r * cols + c)],
                    y = back[static_cast<size_t>(r * cols + c)];
        // 3 mantissa bits: relative error <= 1/16 for normals, absolute <= scale * 2^-10 below.
        QVERIFY(std::fabs(x - y) <= std::fabs(x) / 16 + m.scale_of(r, c) * 0x1p-10f);
      }
  }
};

QTEST_GUILESS_MAIN(Fp8Test)
#include "fp8_test.moc"
