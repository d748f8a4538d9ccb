// The CUDA CalibOps (engine/backend/cuda/cuda_calib_ops.h) against the CPU one
// (make_cpu_calib_ops(), the reference) on random data. Tolerances:
//   linear, attention: relative L2 error <= 1e-5 (float32 summation order only);
//   hessian: max |gpu - cpu| <= 1e-5 max |cpu| (float32 chunk products, double sums);
//   gptq: >= 99.9% of codes and scales identical (values on a rounding boundary may differ: the
//   factorization and the batched updates sum in another order), g_idx, dead columns, damping and
//   fallback identical, loss within 1e-3 relative; the RTN fallback bit for bit.
// Errors: a non-finite activation or Hessian and a Hessian of the wrong size give the CPU's
// messages; a device that does not exist gives kUnsupported naming it (runs without a GPU too).
// A QINFO line times the Hessian and GPTQ (4-bit, group 128, act-order) of Llama-3.1-8B's down
// projection (4096 x 14336) and of a 14336 x 4096 matrix, from 8192 random rows each.
#include <QtTest>

#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "engine/backend/cuda/cuda_calib_ops.h"
#include "engine/core/strings.h"
#include "engine/quant/calib_ops.h"
#include "test_support.h"

using namespace lathe;
using namespace lathe::test;

namespace {

std::unique_ptr<CalibOps> gpu_ops() {
  Result<std::unique_ptr<CalibOps>> r = create_cuda_calib_ops(0);
  if (!r.is_ok()) qFatal("create_cuda_calib_ops(0): %s", r.status().message().c_str());
  return std::move(r).value();
}

double rel_l2(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    num += d * d;
    den += static_cast<double>(want[i]) * want[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// Fast uniform values in [-1, 1) (the big timing inputs are ~100M values).
std::vector<float> fast_random(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (float& x : v) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    x = static_cast<float>(static_cast<int32_t>(s >> 32)) * (1.0f / 2147483648.0f);
  }
  return v;
}

// Activations with correlated, uneven columns (a Hessian with spread eigenvalues): x [n, k].
std::vector<float> activations(int64_t n, int64_t k, uint64_t seed) {
  std::vector<float> x = fast_random(static_cast<size_t>(n * k), seed);
  for (int64_t r = 0; r < n; ++r) {
    float* row = x.data() + r * k;
    for (int64_t j = k - 1; j > 0; --j) row[j] += 0.5f * row[j - 1];
    for (int64_t j = 0; j < k; ++j) row[j] *= 1.f + static_cast<float>(j % 7);
  }
  return x;
}

CalibLayout layout_of(const std::vector<int64_t>& lengths) {
  CalibLayout l;
  l.start.push_back(0);
  for (int64_t len : lengths) {
    for (int64_t i = 0; i < len; ++i) l.positions.push_back(static_cast<int32_t>(i));
    l.start.push_back(l.start.back() + len);
  }
  return l;
}

struct GptqCompare {
  double code_match = 0, scale_match = 0, loss_rel = 0;
};

GptqCompare compare(const GptqResult& g, const GptqResult& c) {
  GptqCompare r;
  int64_t same = 0;
  for (size_t i = 0; i < c.q.codes.size(); ++i) same += g.q.codes[i] == c.q.codes[i];
  r.code_match = c.q.codes.empty() ? 1.0 : static_cast<double>(same) / c.q.codes.size();
  same = 0;
  for (size_t i = 0; i < c.q.scales.size(); ++i)
    same += g.q.scales[i] == c.q.scales[i] && g.q.zeros[i] == c.q.zeros[i];
  r.scale_match = c.q.scales.empty() ? 1.0 : static_cast<double>(same) / c.q.scales.size();
  r.loss_rel = std::fabs(g.loss - c.loss) / std::max(1e-30, std::fabs(c.loss));
  return r;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

class CudaCalibOpsTest : public QObject {
  Q_OBJECT

 private slots:
  void missing_device_is_unsupported() {
    // Needs no GPU: without a driver the device is just as unusable.
    Result<std::unique_ptr<CalibOps>> r = create_cuda_calib_ops(977);
    QVERIFY(!r.is_ok());
    QCOMPARE(r.status().code(), ErrorCode::kUnsupported);
    QVERIFY2(r.status().message().find("977") != std::string::npos, r.status().message().c_str());
  }

  void name_and_peak() {
    LATHE_REQUIRE_GPU();
    std::unique_ptr<CalibOps> ops = gpu_ops();
    QVERIFY2(ops->name().rfind("cuda:0 ", 0) == 0, ops->name().c_str());
    QCOMPARE(ops->peak_device_bytes(), int64_t{0});
    CalibLinear l;
    l.n = 8;
    l.k = 16;
    l.w = random_floats(8 * 16, 1);
    std::vector<float> x = random_floats(4 * 16, 2), y(4 * 8);
    LATHE_QVERIFY_OK(ops->linear(x.data(), 4, l, y.data()));
    QVERIFY(ops->peak_device_bytes() >= (8 * 16 + 4 * 16 + 4 * 8) * 4);
  }

  void linear_matches_cpu() {
    LATHE_REQUIRE_GPU();
    std::unique_ptr<CalibOps> gpu = gpu_ops(), cpu = make_cpu_calib_ops();
    struct Shape {
      int64_t rows, n, k;
    };
    uint32_t seed = 10;
    for (const Shape& s : {Shape{1, 1, 1}, Shape{37, 65, 129}, Shape{300, 257, 96},
                           Shape{513, 1024, 4096}, Shape{2, 3000, 7}})
      for (bool bias : {false, true}) {
        CalibLinear l;
        l.n = s.n;
        l.k = s.k;
        l.w = random_floats(static_cast<size_t>(s.n * s.k), ++seed);
        if (bias) l.bias = random_floats(static_cast<size_t>(s.n), ++seed);
        const std::vector<float> x = random_floats(static_cast<size_t>(s.rows * s.k), ++seed);
        std::vector<float> want(static_cast<size_t>(s.rows * s.n)), got(want.size(), NAN);
        LATHE_QVERIFY_OK(cpu->linear(x.data(), s.rows, l, want.data()));
        LATHE_QVERIFY_OK(gpu->linear(x.data(), s.rows, l, got.data()));
        const double e = rel_l2(got, want);
        QVERIFY2(e <= 1e-5, qPrintable(QString("rows %1 n %2 k %3 bias %4: rel err %5")
                                           .arg(s.rows)
                                           .arg(s.n)
                                           .arg(s.k)
                                           .arg(bias)
                                           .arg(e)));
      }
  }

  // The MLP's SwiGLU activation: rows in one piece and (16384 rows of 2 x 5632 + 2048 floats, more
  // than 512 MiB) in several; with and without biases; a gate and up that do not match are refused.
  void mlp_act_matches_cpu() {
    LATHE_REQUIRE_GPU();
    std::unique_ptr<CalibOps> gpu = gpu_ops(), cpu = make_cpu_calib_ops();
    struct Shape {
      int64_t rows, ff, k;
    };
    uint32_t seed = 40;
    for (const Shape& s : {Shape{1, 3, 5}, Shape{300, 704, 256}, Shape{16384, 5632, 2048}})
      for (bool bias : {false, true}) {
        if (bias && s.rows > 1000) continue;
        CalibLinear gate{fast_random(static_cast<size_t>(s.ff * s.k), ++seed), {}, s.ff, s.k};
        CalibLinear up{fast_random(static_cast<size_t>(s.ff * s.k), ++seed), {}, s.ff, s.k};
        if (bias) {
          gate.bias = fast_random(static_cast<size_t>(s.ff), ++seed);
          up.bias = fast_random(static_cast<size_t>(s.ff), ++seed);
        }
        const std::vector<float> x = fast_random(static_cast<size_t>(s.rows * s.k), ++seed);
        std::vector<float> want(static_cast<size_t>(s.rows * s.ff)), got(want.size(), NAN);
        LATHE_QVERIFY_OK(cpu->mlp_act(x.data(), s.rows, gate, up, want.data()));
        LATHE_QVERIFY_OK(gpu->mlp_act(x.data(), s.rows, gate, up, got.data()));
        const double e = rel_l2(got, want);
        QVERIFY2(e <= 1e-5, qPrintable(QString("rows %1 ff %2 k %3 bias %4: rel err %5")
                                           .arg(s.rows)
                                           .arg(s.ff)
                                           .arg(s.k)
                                           .arg(bias)
                                           .arg(e)));
      }
    CalibLinear gate{fast_random(12, 1), {}, 3, 4}, up{fast_random(15, 2), {}, 3, 5};
    std::vector<float> x(20), m(12);
    const Status st = gpu->mlp_act(x.data(), 4, gate, up, m.data());
    QCOMPARE(static_cast<int>(st.code()), static_cast<int>(ErrorCode::kInvalidArgument));
    QVERIFY2(st.message().find("not two linears of one MLP") != std::string::npos,
             st.message().c_str());
  }

  void linear_in_pieces() {
    // 40000 rows of 2048 + 2048 floats are more than one 512 MiB piece: rows around the piece
    // boundary and at the end against the CPU.
    LATHE_REQUIRE_GPU();
    std::unique_ptr<CalibOps> gpu = gpu_ops(), cpu = make_cpu_calib_ops();
    const int64_t rows = 40000, n = 2048, k = 2048;
    CalibLinear l;
    l.n = n;
    l.k = k;
    l.w = fast_random(static_cast<size_t>(n * k), 5);
    l.bias = fast_random(static_cast<size_t>(n), 6);
    const std::vector<float> x = fast_random(static_cast<size_t>(rows * k), 7);
    std::vector<float> y(static_cast<size_t>(rows * n), NAN);
    LATHE_QVERIFY_OK(gpu->linear(x.data(), rows, l, y.data()));
    for (int64_t r0 : {int64_t{0}, int64_t{32700}, int64_t{rows - 64}}) {
      const int64_t m = r0 == 32700 ? 200 : 64;
      std::vector<float> want(static_cast<size_t>(m * n));
      LATHE_QVERIFY_OK(cpu->linear(x.data() + r0 * k, m, l, want.data()));
      const std::vector<float> got(y.begin() + r0 * n, y.begin() + (r0 + m) * n);
      const double e = rel_l2(got, want);
      QVERIFY2(e <= 1e-5, qPrintable(QString("rows %1..: rel err %2").arg(r0).arg(e)));
    }
  }

  void attention_matches_cpu() {
    LATHE_REQUIRE_GPU();
    std::unique_ptr<CalibOps> gpu = gpu_ops(), cpu = make_cpu_calib_ops();
    struct Case {
      std::vector<int64_t> lengths;
      int64_t nh, nkv, hd, window;
    };
    const std::vector<Case> cases = {
        {{1, 5, 40, 77}, 8, 2, 64, 0},    {{1, 5, 40, 77}, 8, 2, 64, 16},
        {{512, 3, 1}, 4, 4, 128, 0},      {{100, 33}, 6, 1, 96, 0},
        {{64, 65}, 4, 2, 40, 7},          {{1}, 2, 1, 256, 0},
        {{300, 200, 129}, 32, 8, 128, 0}, {{50}, 3, 3, 18, 0}};
    uint32_t seed = 100;
    for (const Case& c : cases) {
      const CalibLayout layout = layout_of(c.lengths);
      const int64_t rows = layout.rows();
      CalibAttentionShape s;
      s.num_heads = c.nh;
      s.num_kv_heads = c.nkv;
      s.head_dim = c.hd;
      s.sliding_window = c.window;
      // Scores of a few units: the softmax is neither flat nor one-hot.
      const float amp = 2.f / std::sqrt(std::sqrt(static_cast<float>(c.hd)));
      const std::vector<float> q =
          random_floats(static_cast<size_t>(rows * c.nh * c.hd), ++seed, -amp, amp);
      const std::vector<float> k =
          random_floats(static_cast<size_t>(rows * c.nkv * c.hd), ++seed, -amp, amp);
      const std::vector<float> v = random_floats(static_cast<size_t>(rows * c.nkv * c.hd), ++seed);
      std::vector<float> want(q.size()), got(q.size(), NAN);
      LATHE_QVERIFY_OK(cpu->attention(layout, s, q.data(), k.data(), v.data(), want.data()));
      LATHE_QVERIFY_OK(gpu->attention(layout, s, q.data(), k.data(), v.data(), got.data()));
      double worst = 0;
      for (size_t i = 0; i < want.size(); ++i)
        worst = std::max(worst, static_cast<double>(std::fabs(got[i] - want[i])));
      const double e = rel_l2(got, want);
      QVERIFY2(e <= 1e-5 && worst <= 1e-4,
               qPrintable(QString("heads %1/%2 dim %3 window %4: rel err %5, worst %6")
                              .arg(c.nh)
                              .arg(c.nkv)
                              .arg(c.hd)
                              .arg(c.window)
                              .arg(e)
                              .arg(worst)));
    }
  }

  void hessian_matches_cpu() {
    LATHE_REQUIRE_GPU();
    std::unique_ptr<CalibOps> gpu = gpu_ops(), cpu = make_cpu_calib_ops();
    struct Shape {
      int64_t rows, n, k;  // x has `rows` rows, the Hessian reads the first n
    };
    for (const Shape& s :
         {Shape{2500, 2500, 300}, Shape{700, 600, 1100}, Shape{3000, 2049, 64}, Shape{1, 1, 5}}) {
      const std::vector<float> x = activations(s.rows, s.k, static_cast<uint64_t>(s.k));
      Result<std::vector<double>> want = cpu->hessian(x.data(), s.n, s.k);
      Result<std::vector<double>> got = gpu->hessian(x.data(), s.n, s.k);
      LATHE_QVERIFY_RESULT(want);
      LATHE_QVERIFY_RESULT(got);
      QCOMPARE(got->size(), want->size());
      double worst = 0, scale = 0;
      for (size_t i = 0; i < want->size(); ++i) {
        worst = std::max(worst, std::fabs((*got)[i] - (*want)[i]));
        scale = std::max(scale, std::fabs((*want)[i]));
      }
      QVERIFY2(
          worst <= 1e-5 * scale,
          qPrintable(QString("n %1 k %2: worst %3 of %4").arg(s.n).arg(s.k).arg(worst).arg(scale)));
      for (int64_t i = 0; i < s.k; ++i)  // symmetric
        for (int64_t j = 0; j < i; ++j) QCOMPARE((*got)[i * s.k + j], (*got)[j * s.k + i]);
    }
  }

  void hessian_non_finite_is_the_cpus_error() {
    LATHE_REQUIRE_GPU();
    std::unique_ptr<CalibOps> gpu = gpu_ops(), cpu = make_cpu_calib_ops();
    const int64_t n = 2500, k = 70;
    std::vector<float> x = activations(n, k, 3);
    x[2400 * k + 3] = INFINITY;  // later chunk
    x[1700 * k + 33] = NAN;      // the first one
    x[1700 * k + 50] = -INFINITY;
    Result<std::vector<double>> want = cpu->hessian(x.data(), n, k);
    Result<std::vector<double>> got = gpu->hessian(x.data(), n, k);
    QVERIFY(!want.is_ok() && !got.is_ok());
    QCOMPARE(got.status().code(), want.status().code());
    QCOMPARE(QString::fromStdString(got.status().message()),
             QString::fromStdString(want.status().message()));
    QVERIFY(got.status().message().find("row 1700, feature 33") != std::string::npos);
    // Rows after n are not read.
    LATHE_QVERIFY_RESULT(gpu->hessian(x.data(), 1700, k));
  }

  void gptq_matches_cpu() {
    LATHE_REQUIRE_GPU();
    std::unique_ptr<CalibOps> gpu = gpu_ops(), cpu = make_cpu_calib_ops();
    struct Case {
      int64_t rows, cols, group, block;
      bool sym, act_order;
      int bits = 4;
      DType scale = DType::kF32;
      int min_zero = 0;
    };
    std::vector<Case> cases;
    for (int64_t group : {32, 128, -1})
      for (bool sym : {true, false})
        for (bool act : {false, true}) cases.push_back({96, 384, group, 128, sym, act});
    cases.push_back({64, 320, 32, 128, true, true});  // 320 = 2.5 x 128
    cases.push_back({64, 320, 64, 128, false, false});
    cases.push_back({50, 320, -1, 128, false, true});
    cases.push_back({40, 384, 96, 256, true, true});                        // pieces in a block
    cases.push_back({40, 384, 32, 64, false, true});                        // narrow blocks
    cases.push_back({40, 384, 128, 128, false, true, 8, DType::kBF16, 1});  // 8-bit, bf16
    cases.push_back({40, 256, 32, 128, true, false, 4, DType::kF16, 0});    // f16 scales
    cases.push_back({1, 40, 8, 128, false, true});
    uint64_t seed = 1000;
    for (const Case& t : cases) {
      const int64_t n = 3 * t.cols;
      std::vector<float> x = activations(n, t.cols, ++seed);
      for (int64_t r = 0; r < n; ++r) x[r * t.cols + 5] = 0.f;  // a dead column
      Result<std::vector<double>> h = cpu->hessian(x.data(), n, t.cols);
      LATHE_QVERIFY_RESULT(h);
      const std::vector<float> w =
          random_floats(static_cast<size_t>(t.rows * t.cols), static_cast<uint32_t>(++seed));
      GptqConfig c;
      c.quant.bits = t.bits;
      c.quant.group_size = t.group;
      c.quant.symmetric = t.sym;
      c.quant.scale_dtype = t.scale;
      c.quant.min_zero = t.min_zero;
      c.act_order = t.act_order;
      c.block_size = t.block;
      Result<GptqResult> want = cpu->gptq(w.data(), t.rows, t.cols, *h, c);
      Result<GptqResult> got = gpu->gptq(w.data(), t.rows, t.cols, *h, c);
      LATHE_QVERIFY_RESULT(want);
      LATHE_QVERIFY_RESULT(got);
      const QString what = QString("%1 x %2 group %3 block %4 %5 act_order %6 bits %7")
                               .arg(t.rows)
                               .arg(t.cols)
                               .arg(t.group)
                               .arg(t.block)
                               .arg(t.sym ? "sym" : "asym")
                               .arg(t.act_order)
                               .arg(t.bits);
      QVERIFY2(!want->fell_back_to_rtn, qPrintable(what));
      QCOMPARE(got->fell_back_to_rtn, false);
      QCOMPARE(got->dead_columns, int64_t{1});
      QCOMPARE(got->dead_columns, want->dead_columns);
      QCOMPARE(got->damp_percent_used, want->damp_percent_used);
      QVERIFY(got->q.g_idx == want->q.g_idx);
      QCOMPARE(got->q.group_size, want->q.group_size);
      const GptqCompare m = compare(*got, *want);
      QVERIFY2(m.code_match >= 0.999 && m.scale_match >= 0.999 && m.loss_rel <= 1e-3,
               qPrintable(QString("%1: codes %2, scales %3, loss %4 vs %5")
                              .arg(what)
                              .arg(m.code_match)
                              .arg(m.scale_match)
                              .arg(got->loss)
                              .arg(want->loss)));
    }
  }

  void gptq_rtn_fallback_is_the_cpus() {
    LATHE_REQUIRE_GPU();
    std::unique_ptr<CalibOps> gpu = gpu_ops(), cpu = make_cpu_calib_ops();
    const int64_t rows = 24, cols = 64, n = 200;
    const std::vector<float> x = activations(n, cols, 77);
    Result<std::vector<double>> h = cpu->hessian(x.data(), n, cols);
    LATHE_QVERIFY_RESULT(h);
    (*h)[9 * cols + 9] = -50.0 * (*h)[9 * cols + 9];  // no damping up to 100% helps
    const std::vector<float> w = random_floats(static_cast<size_t>(rows * cols), 78);
    for (bool act : {false, true}) {
      GptqConfig c;
      c.quant.group_size = 32;
      c.quant.symmetric = false;
      c.act_order = act;
      Result<GptqResult> want = cpu->gptq(w.data(), rows, cols, *h, c);
      Result<GptqResult> got = gpu->gptq(w.data(), rows, cols, *h, c);
      LATHE_QVERIFY_RESULT(want);
      LATHE_QVERIFY_RESULT(got);
      QVERIFY(want->fell_back_to_rtn);
      QVERIFY(got->fell_back_to_rtn);
      QCOMPARE(QString::fromStdString(got->fallback_reason),
               QString::fromStdString(want->fallback_reason));
      QCOMPARE(got->damp_percent_used, want->damp_percent_used);
      QVERIFY(got->q.codes == want->q.codes);
      QVERIFY(got->q.scales == want->q.scales);
      QVERIFY(got->q.zeros == want->q.zeros);
      QVERIFY(got->q.g_idx == want->q.g_idx);
      QVERIFY(std::fabs(got->loss - want->loss) <= 1e-9 * std::fabs(want->loss));
    }
  }

  void gptq_bad_input_is_the_cpus_error() {
    LATHE_REQUIRE_GPU();
    std::unique_ptr<CalibOps> gpu = gpu_ops(), cpu = make_cpu_calib_ops();
    const int64_t rows = 4, cols = 32;
    const std::vector<float> w = random_floats(rows * cols, 5);
    GptqConfig c;
    c.quant.group_size = 32;
    std::vector<double> h(cols * cols, 0.0);
    for (int64_t i = 0; i < cols; ++i) h[i * cols + i] = 1.0;
    auto same_error = [&](const std::vector<double>& hh, const GptqConfig& cc) {
      Result<GptqResult> want = cpu->gptq(w.data(), rows, cols, hh, cc);
      Result<GptqResult> got = gpu->gptq(w.data(), rows, cols, hh, cc);
      QVERIFY(!want.is_ok());
      QVERIFY(!got.is_ok());
      QCOMPARE(got.status().code(), want.status().code());
      QCOMPARE(QString::fromStdString(got.status().message()),
               QString::fromStdString(want.status().message()));
    };
    std::vector<double> nan_h = h;
    nan_h[3 * cols + 7] = NAN;
    same_error(nan_h, c);
    same_error(std::vector<double>(cols * cols - 1, 1.0), c);
    GptqConfig bad_group = c;
    bad_group.quant.group_size = 24;
    same_error(h, bad_group);
    GptqConfig bad_damp = c;
    bad_damp.damp_percent = -1;
    same_error(h, bad_damp);
  }

  void gptq_speed_8b_shapes() {
    LATHE_REQUIRE_GPU();
    std::unique_ptr<CalibOps> gpu = gpu_ops();
    struct Shape {
      const char* name;
      int64_t rows, cols;
    };
    QString report;
    for (const Shape& s :
         {Shape{"down_proj 4096 x 14336", 4096, 14336}, Shape{"14336 x 4096", 14336, 4096}}) {
      const int64_t n = 8192;
      const std::vector<float> x = activations(n, s.cols, static_cast<uint64_t>(s.cols));
      const std::vector<float> w = fast_random(static_cast<size_t>(s.rows * s.cols), 9);
      auto t0 = std::chrono::steady_clock::now();
      Result<std::vector<double>> h = gpu->hessian(x.data(), n, s.cols);
      const double t_h = seconds_since(t0);
      LATHE_QVERIFY_RESULT(h);
      GptqConfig c;
      c.quant.bits = 4;
      c.quant.group_size = 128;
      c.act_order = true;
      t0 = std::chrono::steady_clock::now();
      Result<GptqResult> r = gpu->gptq(w.data(), s.rows, s.cols, *h, c);
      const double t_g = seconds_since(t0);
      LATHE_QVERIFY_RESULT(r);
      QVERIFY(!r->fell_back_to_rtn);
      QVERIFY(std::isfinite(r->loss) && r->loss > 0);
      for (uint8_t code : r->q.codes) QVERIFY(code <= 15);
      report += QString(" %1: hessian %2 s, gptq %3 s;")
                    .arg(s.name)
                    .arg(t_h, 0, 'f', 3)
                    .arg(t_g, 0, 'f', 3);
    }
    qInfo("GPTQ 4-bit g128 act-order on %s, Hessians from 8192 rows:%s peak device memory %s",
          gpu->name().c_str(), qPrintable(report),
          format_bytes(static_cast<double>(gpu->peak_device_bytes())).c_str());
  }
};

QTEST_GUILESS_MAIN(CudaCalibOpsTest)
#include "cuda_calib_ops_test.moc"
