// The AWQ search core (engine/quant/awq_search.h) on a synthetic block: two linears sharing an
// input with a few loud channels. The scale search calls the block once per alpha, picks an
// alpha > 0 and lowers the block's output error below plain RTN's; the clip search never widens a
// range and does not raise its own objective; folding 1/s into the producer leaves the block's
// function unchanged.
#include <QtTest>

#include <cmath>
#include <vector>

#include "engine/quant/awq_search.h"
#include "quant_test_util.h"
#include "test_support.h"

using namespace lathe;

namespace {

constexpr int64_t kK = 128, kTokens = 256;

// x [tokens, K] with loud channels every 16th.
std::vector<float> activations() {
  std::vector<float> x = test::random_normal(static_cast<size_t>(kTokens * kK), 31);
  for (int64_t t = 0; t < kTokens; ++t)
    for (int64_t j = 0; j < kK; j += 16) x[static_cast<size_t>(t * kK + j)] *= 20.f;
  return x;
}

// y = W x for every token: [tokens, rows].
std::vector<double> outputs(const float* w, int64_t rows, const std::vector<float>& x) {
  std::vector<double> y(static_cast<size_t>(kTokens * rows));
  for (int64_t t = 0; t < kTokens; ++t)
    for (int64_t r = 0; r < rows; ++r) {
      double s = 0;
      for (int64_t j = 0; j < kK; ++j)
        s += double(w[r * kK + j]) * x[static_cast<size_t>(t * kK + j)];
      y[static_cast<size_t>(t * rows + r)] = s;
    }
  return y;
}

double mse(const std::vector<double>& a, const std::vector<double>& b) {
  double e = 0;
  for (size_t i = 0; i < a.size(); ++i) e += (a[i] - b[i]) * (a[i] - b[i]);
  return e / double(a.size());
}

}  // namespace

class AwqSearchTest : public QObject {
  Q_OBJECT
 private slots:
  void scale_search_beats_plain_rtn() {
    const std::vector<float> x = activations();
    const std::vector<float> w1 = test::random_normal(64 * kK, 1, 0.05f);
    const std::vector<float> w2 = test::random_normal(32 * kK, 2, 0.05f);
    const std::vector<double> ref1 = outputs(w1.data(), 64, x), ref2 = outputs(w2.data(), 32, x);
    AwqConfig cfg;
    cfg.quant.group_size = 64;
    int calls = 0;
    const AwqLossFn loss = [&](const std::vector<std::vector<float>>& cand) -> Result<double> {
      ++calls;
      if (cand.size() != 2 || cand[0].size() != w1.size() || cand[1].size() != w2.size())
        return invalid_argument("wrong candidate shapes");
      return mse(outputs(cand[0].data(), 64, x), ref1) + mse(outputs(cand[1].data(), 32, x), ref2);
    };
    const std::vector<float> x_mean = awq_activation_means(x.data(), kTokens, kK);
    QVERIFY(x_mean[0] > 10 * x_mean[1]);
    Result<AwqScaleResult> r =
        awq_search_scales(x_mean, {{w1.data(), 64}, {w2.data(), 32}}, kK, cfg, loss);
    LATHE_QVERIFY_RESULT(r);
    QCOMPARE(calls, 20);  // before the RTN call below
    QCOMPARE(r->losses.size(), size_t{20});
    QVERIFY2(r->best_alpha > 0.0, qPrintable(QString::number(r->best_alpha)));
    // Plain RTN of the same linears on the same block: the best alpha is clearly better, and
    // better than alpha = 0 (s = 1 / w_mean, about RTN here).
    Result<IntQuantizedMatrix> q1 = quantize_int_rtn(w1.data(), 64, kK, cfg.quant);
    Result<IntQuantizedMatrix> q2 = quantize_int_rtn(w2.data(), 32, kK, cfg.quant);
    LATHE_QVERIFY_RESULT(q1);
    LATHE_QVERIFY_RESULT(q2);
    Result<double> rtn = loss({dequantize_int(*q1), dequantize_int(*q2)});
    LATHE_QVERIFY_RESULT(rtn);
    QVERIFY2(r->best_loss < 0.5 * *rtn && r->best_loss < 0.5 * r->losses[0],
             qPrintable(QString("best %1 vs RTN %2, alpha 0 %3")
                            .arg(r->best_loss)
                            .arg(*rtn)
                            .arg(r->losses[0])));
    // Normalisation: max(s) * min(s) == 1.
    const auto [lo, hi] = std::minmax_element(r->scales.begin(), r->scales.end());
    QVERIFY(std::fabs(double(*lo) * double(*hi) - 1.0) < 1e-3);
    // Loud channels get larger scales.
    QVERIFY(r->scales[0] > r->scales[1]);

    // A callback error stops the search with that error.
    const AwqLossFn failing = [](const std::vector<std::vector<float>>&) -> Result<double> {
      return io_error("block failed");
    };
    QVERIFY(!awq_search_scales(x_mean, {{w1.data(), 64}}, kK, cfg, failing).is_ok());
    QVERIFY(
        !awq_search_scales(std::vector<float>(3, 1.f), {{w1.data(), 64}}, kK, cfg, loss).is_ok());
  }

  void clip_search_shrinks_only_where_it_helps() {
    const std::vector<float> x = activations();
    std::vector<float> w = test::random_normal(16 * kK, 3, 0.05f);
    w[5] = 1.5f;  // an outlier weight: clipping the range helps the rest of its group
    AwqConfig cfg;
    cfg.quant.group_size = 32;
    Result<std::vector<float>> clip = awq_search_clip(w.data(), 16, kK, x.data(), kTokens, cfg);
    LATHE_QVERIFY_RESULT(clip);
    QCOMPARE(clip->size(), size_t{16 * 4});
    for (int64_t r = 0; r < 16; ++r)
      for (int64_t g = 0; g < 4; ++g) {
        float amax = 0;
        for (int64_t j = 0; j < 32; ++j)
          amax = std::max(amax, std::fabs(w[static_cast<size_t>(r * kK + g * 32 + j)]));
        const float c = (*clip)[static_cast<size_t>(r * 4 + g)];
        QVERIFY(c <= amax && c >= 0.55f * amax);  // at most 45% shrink (AutoAWQ's 10 steps)
      }
    std::vector<float> clipped = w;
    awq_apply_clip(clipped.data(), 16, kK, 32, *clip);
    for (size_t i = 0; i < w.size(); ++i) QVERIFY(std::fabs(clipped[i]) <= std::fabs(w[i]));
  }

  void folding_keeps_the_function() {
    // norm(x) * g feeding W: dividing g by s and multiplying W's columns by s is the same block.
    const std::vector<float> x = test::random_normal(kK, 4);
    std::vector<float> g = test::random_normal(kK, 5);
    std::vector<float> w = test::random_normal(8 * kK, 6);
    std::vector<float> s(kK);
    for (int64_t j = 0; j < kK; ++j) s[static_cast<size_t>(j)] = 0.5f + float(j % 7) / 4;
    auto block = [&](const std::vector<float>& gg, const std::vector<float>& ww) {
      std::vector<float> xin(kK);
      for (int64_t j = 0; j < kK; ++j)
        xin[static_cast<size_t>(j)] = x[static_cast<size_t>(j)] * gg[static_cast<size_t>(j)];
      std::vector<double> y(8);
      for (int64_t r = 0; r < 8; ++r)
        for (int64_t j = 0; j < kK; ++j)
          y[static_cast<size_t>(r)] +=
              double(ww[static_cast<size_t>(r * kK + j)]) * xin[static_cast<size_t>(j)];
      return y;
    };
    const std::vector<double> before = block(g, w);
    awq_fold_into_norm(g.data(), nullptr, kK, s.data());
    awq_scale_columns(w.data(), 8, kK, s.data());
    const std::vector<double> after = block(g, w);
    for (int i = 0; i < 8; ++i)
      QVERIFY(std::fabs(before[static_cast<size_t>(i)] - after[static_cast<size_t>(i)]) <
              1e-4 * (1 + std::fabs(before[static_cast<size_t>(i)])));

    // A producing linear P [K, 16] and its bias: y = W (P z + b).
    std::vector<float> p = test::random_normal(kK * 16, 7), b = test::random_normal(kK, 8);
    const std::vector<float> z = test::random_normal(16, 9);
    std::vector<float> w2 = test::random_normal(4 * kK, 10);
    auto chain = [&]() {
      std::vector<double> y(4);
      for (int64_t r = 0; r < 4; ++r)
        for (int64_t j = 0; j < kK; ++j) {
          double h = b[static_cast<size_t>(j)];
          for (int64_t c = 0; c < 16; ++c)
            h += double(p[static_cast<size_t>(j * 16 + c)]) * z[static_cast<size_t>(c)];
          y[static_cast<size_t>(r)] += double(w2[static_cast<size_t>(r * kK + j)]) * h;
        }
      return y;
    };
    const std::vector<double> y0 = chain();
    awq_fold_into_linear(p.data(), b.data(), kK, 16, s.data());
    awq_scale_columns(w2.data(), 4, kK, s.data());
    const std::vector<double> y1 = chain();
    for (int i = 0; i < 4; ++i)
      QVERIFY(std::fabs(y0[static_cast<size_t>(i)] - y1[static_cast<size_t>(i)]) <
              1e-3 * (1 + std::fabs(y0[static_cast<size_t>(i)])));
  }
};

QTEST_GUILESS_MAIN(AwqSearchTest)
#include "awq_search_test.moc"
