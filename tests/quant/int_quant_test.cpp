// Integer quantization (engine/quant/int_quant.h): GPTQ's grid conventions on hand-checked groups,
// round-to-nearest error bounds for every bits / group size / symmetry, scales representable in
// their storage type, INT8 W8A16 per channel, and the configs that must be refused.
#include <QtTest>

#include <cmath>
#include <vector>

#include "engine/core/half.h"
#include "engine/quant/int_quant.h"
#include "quant_test_util.h"
#include "test_support.h"

using namespace lathe;

class IntQuantTest : public QObject {
  Q_OBJECT
 private slots:
  void asymmetric_grid_is_gptqs() {
    IntQuantConfig c{4, 4, false, DType::kF32, 0};
    // min -0.3, max 1.2: s = 1.5 / 15 = 0.1, z = round(3) = 3.
    IntGroupParams p = int_grid_params(-0.3f, 1.2f, c);
    QCOMPARE(p.scale, 1.5f / 15.f);
    QCOMPARE(p.zero, 3);
    // An all-positive group: the range is widened to contain 0 -> z = 0, s = max / 15.
    p = int_grid_params(0.5f, 1.5f, c);
    QCOMPARE(p.zero, 0);
    QCOMPARE(p.scale, 1.5f / 15.f);
    QCOMPARE(int_value(int_code(0.f, p, 15), p), 0.f);  // zero is exact
    // All negative: z = 15.
    p = int_grid_params(-3.f, -1.f, c);
    QCOMPARE(p.zero, 15);
    // All zero: the range [-1, 1].
    p = int_grid_params(0.f, 0.f, c);
    QCOMPARE(p.scale, 2.f / 15.f);
  }

  void symmetric_grid_is_gptqs() {
    IntQuantConfig c{4, 32, true, DType::kF32, 0};
    const IntGroupParams p = int_grid_params(-0.75f, 0.5f, c);
    QCOMPARE(p.zero, 8);
    QCOMPARE(p.scale, 1.5f / 15.f);  // 2 * max(|min|, |max|) / 15
    // The largest magnitude clips to 7 * s on the positive side (GPTQ's symmetric grid), and
    // -8 * s is reachable.
    QCOMPARE(int_code(0.75f, p, 15), 15);
    QCOMPARE(int_code(-0.75f, p, 15), 0);
    // Round half to even: 0.25 / 0.1 = 2.5 -> 2.
    QCOMPARE(int_code(0.25f, IntGroupParams{0.1f, 8}, 15), 10);
    IntQuantConfig c8{8, -1, true, DType::kF32, 0};
    QCOMPARE(int_grid_params(-1.f, 1.f, c8).zero, 128);
    QCOMPARE(int_grid_params(-1.f, 1.f, c8).scale, 2.f / 255.f);
  }

  void rtn_error_is_at_most_half_a_step_data() {
    QTest::addColumn<int>("bits");
    QTest::addColumn<int>("group");
    QTest::addColumn<bool>("sym");
    for (int bits : {4, 8})
      for (int group : {32, 64, 128, -1})
        for (bool sym : {true, false})
          QTest::addRow("int%d_g%d_%s", bits, group, sym ? "sym" : "asym") << bits << group << sym;
  }
  void rtn_error_is_at_most_half_a_step() {
    QFETCH(int, bits);
    QFETCH(int, group);
    QFETCH(bool, sym);
    const int64_t rows = 24, cols = 256;
    std::vector<float> w = test::random_normal(rows * cols, 7, 0.05f);
    w[5] = 0.9f;  // an outlier in the first group of row 0
    const IntQuantConfig c{bits, group, sym, DType::kF16, 0};
    Result<IntQuantizedMatrix> q = quantize_int_rtn(w.data(), rows, cols, c);
    LATHE_QVERIFY_RESULT(q);
    const int64_t g = group > 0 ? group : cols;
    QCOMPARE(q->num_groups(), cols / g);
    QCOMPARE(static_cast<int64_t>(q->scales.size()), rows * (cols / g));
    for (int64_t k = 0; k < cols; ++k) QCOMPARE(q->g_idx[static_cast<size_t>(k)], int32_t(k / g));
    const std::vector<float> back = dequantize_int(*q);
    const int max_code = (1 << bits) - 1;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t k = 0; k < cols; ++k) {
        const IntGroupParams p = q->params(r, k / g);
        // Scales are f16 numbers, so the checkpoint stores exactly what was used.
        QCOMPARE(f16_to_f32(f32_to_f16(p.scale)), p.scale);
        const int code = q->codes[static_cast<size_t>(r * cols + k)];
        QVERIFY(code >= 0 && code <= max_code);
        QCOMPARE(back[static_cast<size_t>(r * cols + k)], p.scale * float(code - p.zero));
        const float err = std::fabs(back[static_cast<size_t>(r * cols + k)] -
                                    w[static_cast<size_t>(r * cols + k)]);
        // Half a step, plus what the f16 rounding of the scale moves the grid's far end by (up
        // to (2^bits - 1) * 2^-11 steps). The symmetric grid's clipped end is bounded by a step.
        const float bound = sym ? 1.f : 0.5f + float(max_code) / 2048.f + 1e-3f;
        QVERIFY2(
            err <= bound * p.scale + 1e-7f,
            qPrintable(
                QString("row %1 col %2: |err| %3, scale %4").arg(r).arg(k).arg(err).arg(p.scale)));
      }
    }
  }

  void int8_w8a16_is_per_channel_symmetric() {
    const int64_t rows = 8, cols = 96;  // 96: no power of two needed per channel
    std::vector<float> w = test::random_normal(rows * cols, 3, 0.1f);
    const IntQuantConfig c{8, -1, true, DType::kBF16, 0};
    Result<IntQuantizedMatrix> q = quantize_int_rtn(w.data(), rows, cols, c);
    LATHE_QVERIFY_RESULT(q);
    QCOMPARE(q->num_groups(), int64_t{1});
    double worst = 0;
    for (int64_t r = 0; r < rows; ++r) {
      float amax = 0;
      for (int64_t k = 0; k < cols; ++k)
        amax = std::max(amax, std::fabs(w[static_cast<size_t>(r * cols + k)]));
      const IntGroupParams p = q->params(r, 0);
      QCOMPARE(p.zero, 128);
      QCOMPARE(bf16_to_f32(f32_to_bf16(p.scale)), p.scale);
      QVERIFY(std::fabs(p.scale - amax / 127.5f) <= amax / 127.5f * 0.01f);  // bf16 rounding
      for (int64_t k = 0; k < cols; ++k)
        worst = std::max(
            worst, double(std::fabs(q->value(r, k) - w[static_cast<size_t>(r * cols + k)])) / amax);
    }
    QVERIFY2(worst < 1.0 / 127, qPrintable(QString::number(worst)));
  }

  void gptq_v1_minimum_zero_point() {
    IntQuantConfig c{4, 32, false, DType::kF16, 1};
    // An all-positive group would get z = 0, which GPTQ's v1 layout cannot store.
    QCOMPARE(int_grid_params(0.1f, 1.f, c).zero, 1);
  }

  void bad_configs_are_refused() {
    std::vector<float> w(64 * 96, 0.1f);
    Result<IntQuantizedMatrix> q =
        quantize_int_rtn(w.data(), 64, 96, {4, 64, true, DType::kF32, 0});
    QVERIFY(!q.is_ok());
    QVERIFY2(q.status().message().find("does not divide the 96 input columns") != std::string::npos,
             q.status().message().c_str());
    QVERIFY(!quantize_int_rtn(w.data(), 64, 96, {3, 32, true, DType::kF32, 0}).is_ok());
    QVERIFY(!quantize_int_rtn(w.data(), 64, 96, {4, 0, true, DType::kF32, 0}).is_ok());
    QVERIFY(!quantize_int_rtn(w.data(), 64, 96, {4, -2, true, DType::kF32, 0}).is_ok());
    QVERIFY(!quantize_int_rtn(w.data(), 64, 96, {4, 32, true, DType::kQ8_0, 0}).is_ok());
  }

  void scale_rounding_never_reaches_zero() {
    QVERIFY(round_scale_to(1e-12f, DType::kF16) > 0.f);
    QVERIFY(round_scale_to(1e-45f, DType::kBF16) > 0.f);
    QCOMPARE(round_scale_to(1e6f, DType::kF16), 65504.f);
  }
};

QTEST_GUILESS_MAIN(IntQuantTest)
#include "int_quant_test.moc"
