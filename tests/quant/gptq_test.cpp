// GPTQ (engine/quant/gptq.h) and its pieces: the Cholesky helpers against direct products, the
// Hessian accumulator against 2 X^T X / n, GPTQ against the numpy reference of
// scripts/quant/gptq_reference.py (tests/fixtures/quant/gptq_reference: same codes, scales, zero
// points and g_idx), GPTQ's output error clearly below RTN's on correlated inputs, act-order's
// g_idx, dead columns, and the RTN fallback when the Hessian cannot be factorized.
#include <QtTest>

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <cmath>
#include <cstring>
#include <vector>

#include "engine/quant/cholesky.h"
#include "engine/quant/gptq.h"
#include "engine/quant/hessian.h"
#include "model/model_test_files.h"
#include "quant_test_util.h"
#include "test_support.h"

using namespace lathe;

namespace {

template <typename T>
std::vector<T> read_values(const std::string& path) {
  const std::vector<uint8_t> b = test::read_file_bytes(path);
  std::vector<T> v(b.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), b.data(), v.size() * sizeof(T));
  return v;
}

std::vector<double> random_spd(int64_t n, uint32_t seed) {
  const std::vector<float> a = test::random_normal(static_cast<size_t>(n * n), seed);
  std::vector<double> m(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t k = 0; k < n; ++k) s += double(a[i * n + k]) * a[j * n + k];
      m[static_cast<size_t>(i * n + j)] = s + (i == j ? 0.5 : 0.0);
    }
  return m;
}

// Correlated inputs with a few loud channels: X [n, k].
std::vector<float> correlated_inputs(int64_t n, int64_t k, uint32_t seed) {
  const std::vector<float> z = test::random_normal(static_cast<size_t>(n * k), seed);
  const std::vector<float> mix =
      test::random_normal(static_cast<size_t>(k * k), seed + 1, 0.8f / std::sqrt(float(k)));
  std::vector<float> x(static_cast<size_t>(n * k), 0.f);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < k; ++j) {
      double s = z[static_cast<size_t>(r * k + j)];
      for (int64_t t = 0; t < k; ++t)
        s += double(z[static_cast<size_t>(r * k + t)]) * mix[static_cast<size_t>(t * k + j)];
      x[static_cast<size_t>(r * k + j)] = float(s) * (j % 13 == 0 ? 5.f : 1.f);
    }
  return x;
}

// ||W X^T - Q X^T||_F^2 for W, Q [rows, k], X [n, k].
double output_error(const std::vector<float>& w, const std::vector<float>& q,
                    const std::vector<float>& x, int64_t rows, int64_t k, int64_t n) {
  double e = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t < n; ++t) {
      double d = 0;
      for (int64_t j = 0; j < k; ++j)
        d += (double(w[static_cast<size_t>(r * k + j)]) - q[static_cast<size_t>(r * k + j)]) *
             x[static_cast<size_t>(t * k + j)];
      e += d * d;
    }
  return e;
}

}  // namespace

class GptqTest : public QObject {
  Q_OBJECT
 private slots:
  void cholesky_factors_reproduce_the_matrix() {
    const int64_t n = 37;
    const std::vector<double> a = random_spd(n, 1);
    std::vector<double> l = a;
    LATHE_QVERIFY_OK(cholesky_lower(l, n));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        if (j > i) QCOMPARE(l[static_cast<size_t>(i * n + j)], 0.0);
        double s = 0;
        for (int64_t k = 0; k < n; ++k)
          s += l[static_cast<size_t>(i * n + k)] * l[static_cast<size_t>(j * n + k)];
        QVERIFY(std::fabs(s - a[static_cast<size_t>(i * n + j)]) <
                1e-9 * (1 + std::fabs(a[static_cast<size_t>(i * n + j)])));
      }
    const std::vector<double> inv = cholesky_inverse(l, n);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t k = 0; k < n; ++k)
          s += a[static_cast<size_t>(i * n + k)] * inv[static_cast<size_t>(k * n + j)];
        QVERIFY(std::fabs(s - (i == j ? 1.0 : 0.0)) < 1e-8);
      }
    std::vector<double> u = a;
    LATHE_QVERIFY_OK(cholesky_upper(u, n));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        if (j < i) QCOMPARE(u[static_cast<size_t>(i * n + j)], 0.0);
        double s = 0;  // (U^T U)_ij
        for (int64_t k = 0; k < n; ++k)
          s += u[static_cast<size_t>(k * n + i)] * u[static_cast<size_t>(k * n + j)];
        QVERIFY(std::fabs(s - a[static_cast<size_t>(i * n + j)]) <
                1e-9 * (1 + std::fabs(a[static_cast<size_t>(i * n + j)])));
      }
    std::vector<double> bad = a;
    bad[0] = -1.0;
    const Status s = cholesky_lower(bad, n);
    QVERIFY(!s.is_ok());
    QVERIFY2(s.message().find("not positive definite") != std::string::npos, s.message().c_str());
  }

  void hessian_is_two_xtx_over_n() {
    const int64_t k = 20, n1 = 7, n2 = 13;
    const std::vector<float> x = test::random_normal(static_cast<size_t>((n1 + n2) * k), 4);
    HessianAccumulator acc(k);
    QCOMPARE(acc.hessian(), std::vector<double>(static_cast<size_t>(k * k), 0.0));
    LATHE_QVERIFY_OK(acc.add_rows(x.data(), n1));
    LATHE_QVERIFY_OK(acc.add_rows(x.data() + n1 * k, n2));
    QCOMPARE(acc.num_rows(), n1 + n2);
    const std::vector<double> h = acc.hessian();
    for (int64_t a = 0; a < k; ++a)
      for (int64_t b = 0; b < k; ++b) {
        double s = 0;
        for (int64_t r = 0; r < n1 + n2; ++r)
          s += double(x[static_cast<size_t>(r * k + a)]) * x[static_cast<size_t>(r * k + b)];
        QVERIFY(std::fabs(h[static_cast<size_t>(a * k + b)] - 2 * s / (n1 + n2)) < 1e-9);
      }
    std::vector<float> nan_row(static_cast<size_t>(k), 0.f);
    nan_row[3] = std::nanf("");
    QVERIFY(!acc.add_rows(nan_row.data(), 1).is_ok());
    QCOMPARE(acc.num_rows(), n1 + n2);
  }

  void matches_the_numpy_reference_data() {
    QTest::addColumn<QJsonObject>("c");
    QFile f(QString::fromStdString(test::fixture_path("quant/gptq_reference/cases.json")));
    QVERIFY(f.open(QIODevice::ReadOnly));
    for (const QJsonValue& v : QJsonDocument::fromJson(f.readAll()).object()["cases"].toArray())
      QTest::newRow(qPrintable(v.toObject()["name"].toString())) << v.toObject();
  }
  void matches_the_numpy_reference() {
    QFETCH(QJsonObject, c);
    const std::string dir = test::fixture_path("quant/gptq_reference/");
    const std::string name = c["name"].toString().toStdString();
    const std::vector<float> w = read_values<float>(dir + "w.f32");
    const std::vector<double> h = read_values<double>(dir + "h.f64");
    const int64_t rows = 16, cols = 64;
    QCOMPARE(static_cast<int64_t>(w.size()), rows * cols);
    GptqConfig cfg;
    const DType scale_dtype = c["scale"].toString() == "f16" ? DType::kF16 : DType::kF32;
    cfg.quant = {c["bits"].toInt(), c["group"].toInt(), c["sym"].toBool(), scale_dtype, 0};
    cfg.act_order = c["act_order"].toBool();
    cfg.block_size = c.contains("block") ? c["block"].toInt() : 128;
    Result<GptqResult> r = gptq_quantize(w.data(), rows, cols, h, cfg);
    LATHE_QVERIFY_RESULT(r);
    QCOMPARE(r->dead_columns, int64_t{1});  // the fixture zeroes input channel 50
    QVERIFY(!r->fell_back_to_rtn);
    QCOMPARE(r->q.codes, read_values<uint8_t>(dir + name + ".codes"));
    QCOMPARE(r->q.scales, read_values<float>(dir + name + ".scales"));
    QCOMPARE(r->q.zeros, read_values<int32_t>(dir + name + ".zeros"));
    QCOMPARE(r->q.g_idx, read_values<int32_t>(dir + name + ".g_idx"));
    // A float32 Hessian (what a GPU accumulates) gives the same codes here.
    Result<GptqResult> rf =
        gptq_quantize(w.data(), rows, cols, std::vector<float>(h.begin(), h.end()), cfg);
    LATHE_QVERIFY_RESULT(rf);
    int64_t same = 0;
    for (size_t i = 0; i < rf->q.codes.size(); ++i) same += rf->q.codes[i] == r->q.codes[i];
    QVERIFY(same >= int64_t(rf->q.codes.size()) * 99 / 100);
  }

  void beats_rtn_on_the_output_error() {
    const int64_t rows = 48, k = 128, n = 512;
    const std::vector<float> x = correlated_inputs(n, k, 21);
    const std::vector<float> w = test::random_normal(static_cast<size_t>(rows * k), 22, 0.05f);
    HessianAccumulator acc(k);
    LATHE_QVERIFY_OK(acc.add_rows(x.data(), n));
    for (bool act_order : {false, true}) {
      for (bool sym : {true, false}) {
        GptqConfig cfg;
        cfg.quant = {4, 32, sym, DType::kF16, 0};
        cfg.act_order = act_order;
        Result<GptqResult> g = gptq_quantize(w.data(), rows, k, acc.hessian(), cfg);
        LATHE_QVERIFY_RESULT(g);
        Result<IntQuantizedMatrix> rtn = quantize_int_rtn(w.data(), rows, k, cfg.quant);
        LATHE_QVERIFY_RESULT(rtn);
        const double eg = output_error(w, dequantize_int(g->q), x, rows, k, n);
        const double er = output_error(w, dequantize_int(*rtn), x, rows, k, n);
        QVERIFY2(eg < 0.7 * er, qPrintable(QString("act_order %1 sym %2: GPTQ %3 vs RTN %4")
                                               .arg(act_order)
                                               .arg(sym)
                                               .arg(eg)
                                               .arg(er)));
      }
    }
  }

  void act_order_groups_follow_the_hessian_diagonal() {
    const int64_t rows = 8, k = 64;
    std::vector<double> h(static_cast<size_t>(k * k), 0.0);
    for (int64_t i = 0; i < k; ++i) h[static_cast<size_t>(i * k + i)] = double((i * 37) % k) + 1.0;
    const std::vector<float> w = test::random_normal(static_cast<size_t>(rows * k), 2, 0.1f);
    GptqConfig cfg;
    cfg.quant = {4, 16, true, DType::kF32, 0};
    cfg.act_order = true;
    Result<GptqResult> r = gptq_quantize(w.data(), rows, k, h, cfg);
    LATHE_QVERIFY_RESULT(r);
    // The 16 largest diagonal entries form group 0, and so on: g_idx is non-monotonic.
    for (int64_t i = 0; i < k; ++i) {
      const int64_t rank = k - ((i * 37) % k) - 1;  // position in descending order
      QCOMPARE(r->q.g_idx[static_cast<size_t>(i)], int32_t(rank / 16));
    }
    // Dequantized through g_idx, the weights are close to the originals.
    for (int64_t j = 0; j < rows * k; ++j)
      QVERIFY(std::fabs(dequantize_int(r->q)[static_cast<size_t>(j)] - w[static_cast<size_t>(j)]) <
              0.1f);
  }

  void dead_columns_are_zeroed() {
    const int64_t rows = 4, k = 32;
    const std::vector<double> h = random_spd(k, 9);
    std::vector<double> hd = h;
    for (int64_t j = 0; j < k; ++j) {
      hd[static_cast<size_t>(5 * k + j)] = 0.0;
      hd[static_cast<size_t>(j * k + 5)] = 0.0;
    }
    const std::vector<float> w = test::random_normal(static_cast<size_t>(rows * k), 3, 0.1f);
    GptqConfig cfg;
    cfg.quant = {4, -1, true, DType::kF32, 0};
    Result<GptqResult> r = gptq_quantize(w.data(), rows, k, hd, cfg);
    LATHE_QVERIFY_RESULT(r);
    QCOMPARE(r->dead_columns, int64_t{1});
    for (int64_t row = 0; row < rows; ++row) QCOMPARE(r->q.value(row, 5), 0.f);
  }

  void falls_back_to_rtn_when_the_hessian_is_not_positive_definite() {
    const int64_t rows = 4, k = 32;
    std::vector<double> h(static_cast<size_t>(k * k), 0.0);
    for (int64_t i = 0; i < k; ++i) h[static_cast<size_t>(i * k + i)] = i == 7 ? -50.0 : 1.0;
    const std::vector<float> w = test::random_normal(static_cast<size_t>(rows * k), 5, 0.1f);
    GptqConfig cfg;
    cfg.quant = {4, 16, false, DType::kF32, 0};
    Result<GptqResult> r = gptq_quantize(w.data(), rows, k, h, cfg);
    LATHE_QVERIFY_RESULT(r);
    QVERIFY(r->fell_back_to_rtn);
    QVERIFY2(r->fallback_reason.find("round-to-nearest") != std::string::npos,
             r->fallback_reason.c_str());
    QVERIFY(r->damp_percent_used > cfg.damp_percent);  // it retried with more damping
    Result<IntQuantizedMatrix> rtn = quantize_int_rtn(w.data(), rows, k, cfg.quant);
    LATHE_QVERIFY_RESULT(rtn);
    QCOMPARE(r->q.codes, rtn->codes);
  }

  void bad_input_is_refused() {
    const std::vector<float> w(4 * 32, 0.1f);
    GptqConfig cfg;
    QVERIFY(!gptq_quantize(w.data(), 4, 32, std::vector<double>(10, 1.0), cfg).is_ok());
    cfg.quant.group_size = 24;
    std::vector<double> eye(32 * 32, 0.0);
    for (int i = 0; i < 32; ++i) eye[static_cast<size_t>(i * 33)] = 1.0;
    QVERIFY(!gptq_quantize(w.data(), 4, 32, eye, cfg).is_ok());
    cfg.quant.group_size = 16;
    eye[3] = std::nan("");
    QVERIFY(!gptq_quantize(w.data(), 4, 32, eye, cfg).is_ok());
  }
};

QTEST_GUILESS_MAIN(GptqTest)
#include "gptq_test.moc"
