// The CUDA CalibOps (engine/backend/cuda/cuda_calib_ops.h) against the CPU one
// (make_cpu_calib_ops(), the reference) on random data: the same host inputs uploaded to each
// (calib_upload), the op run on both, the results downloaded (calib_download; outputs start as NaN
// so that every value must be written). Tolerances:
//   linear, linear_t, mlp_act, attention: relative L2 error <= 1e-5 (float32 summation order only);
//   rope, add, divide_columns, gather_rows, upload / download: bit for bit;
//   rms_norm, column_abs_mean: within 2 ulps (the double sums run in another order);
//   squared_difference: relative 1e-10;
//   hessian: max |gpu - cpu| <= 1e-5 max |cpu| (float32 chunk products, double sums);
//   gptq: >= 99.9% of codes and scales identical (values on a rounding boundary may differ: the
//   factorization and the batched updates sum in another order), g_idx, dead columns, damping and
//   fallback identical, loss within 1e-3 relative; the RTN fallback bit for bit.
// Errors: a non-finite activation or Hessian and a Hessian of the wrong size give the CPU's
// messages; a tensor larger than the device gives kResourceExhausted naming its shape and the
// flags to pass; a device that does not exist gives kUnsupported naming it (runs without a GPU
// too). Zero-size tensors (0 rows or 0 columns) go through every op.
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

// lhs = the value of a Result, or fail the test with its error.
#define LATHE_QASSIGN(lhs, expr)                                             \
  auto LATHE_CONCAT_(lathe_qres_, __LINE__) = (expr);                        \
  QVERIFY2(LATHE_CONCAT_(lathe_qres_, __LINE__).is_ok(),                     \
           LATHE_CONCAT_(lathe_qres_, __LINE__).status().message().c_str()); \
  lhs = std::move(LATHE_CONCAT_(lathe_qres_, __LINE__)).value()

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

// The largest distance in units in the last place between got[i] and want[i] (NaN: huge).
int64_t max_ulps(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return INT64_MAX;
  auto key = [](float f) {  // monotonic integer order of the floats
    int32_t i = 0;
    std::memcpy(&i, &f, 4);
    return i < 0 ? -static_cast<int64_t>(i & 0x7fffffff) : static_cast<int64_t>(i);
  };
  int64_t worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(got[i]) || std::isnan(want[i])) return INT64_MAX;
    const int64_t d = key(got[i]) - key(want[i]);
    worst = std::max(worst, d < 0 ? -d : d);
  }
  return worst;
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

// --- Running one op on an implementation: host in, host out ----------------------------------

// A [rows, cols] tensor of NaNs: an op that leaves a value unwritten shows.
Result<CalibTensorPtr> nan_tensor(CalibOps& ops, int64_t rows, int64_t cols) {
  const std::vector<float> nan(static_cast<size_t>(rows * cols), NAN);
  return calib_upload(ops, nan.data(), rows, cols);
}

Result<std::vector<float>> run_linear(CalibOps& ops, const std::vector<float>& x, int64_t rows,
                                      const CalibLinear& l) {
  LATHE_ASSIGN_OR_RETURN(CalibTensorPtr xt, calib_upload(ops, x.data(), rows, l.k));
  LATHE_ASSIGN_OR_RETURN(CalibTensorPtr yt, nan_tensor(ops, rows, l.n));
  LATHE_RETURN_IF_ERROR(ops.linear(*xt, l, *yt));
  return calib_download(ops, *yt);
}

Result<std::vector<float>> run_mlp_act(CalibOps& ops, const std::vector<float>& x, int64_t rows,
                                       const CalibLinear& gate, const CalibLinear& up) {
  LATHE_ASSIGN_OR_RETURN(CalibTensorPtr xt, calib_upload(ops, x.data(), rows, gate.k));
  LATHE_ASSIGN_OR_RETURN(CalibTensorPtr mt, nan_tensor(ops, rows, gate.n));
  LATHE_RETURN_IF_ERROR(ops.mlp_act(*xt, gate, up, *mt));
  return calib_download(ops, *mt);
}

Result<std::vector<float>> run_attention(CalibOps& ops, const CalibLayout& layout,
                                         const CalibAttentionShape& s, const std::vector<float>& q,
                                         const std::vector<float>& k, const std::vector<float>& v) {
  const int64_t rows = layout.rows(), qc = s.num_heads * s.head_dim;
  const int64_t kc = s.num_kv_heads * s.head_dim;
  LATHE_ASSIGN_OR_RETURN(CalibTensorPtr qt, calib_upload(ops, q.data(), rows, qc));
  LATHE_ASSIGN_OR_RETURN(CalibTensorPtr kt, calib_upload(ops, k.data(), rows, kc));
  LATHE_ASSIGN_OR_RETURN(CalibTensorPtr vt, calib_upload(ops, v.data(), rows, kc));
  LATHE_ASSIGN_OR_RETURN(CalibTensorPtr ot, nan_tensor(ops, rows, qc));
  LATHE_RETURN_IF_ERROR(ops.attention(layout, s, *qt, *kt, *vt, *ot));
  return calib_download(ops, *ot);
}

Result<std::vector<double>> run_hessian(CalibOps& ops, const std::vector<float>& x, int64_t rows,
                                        int64_t k, int64_t n) {
  LATHE_ASSIGN_OR_RETURN(CalibTensorPtr xt, calib_upload(ops, x.data(), rows, k));
  return ops.hessian(*xt, n);
}

// rms_norm of x [rows, cols] in runs of `width`, into another tensor or in place.
Result<std::vector<float>> run_rms_norm(CalibOps& ops, const std::vector<float>& x, int64_t rows,
                                        int64_t cols, int64_t width,
                                        const std::vector<float>& weight, float eps,
                                        bool in_place) {
  LATHE_ASSIGN_OR_RETURN(CalibTensorPtr xt, calib_upload(ops, x.data(), rows, cols));
  if (in_place) {
    LATHE_RETURN_IF_ERROR(ops.rms_norm(*xt, width, weight, eps, *xt));
    return calib_download(ops, *xt);
  }
  LATHE_ASSIGN_OR_RETURN(CalibTensorPtr out, nan_tensor(ops, rows, cols));
  LATHE_RETURN_IF_ERROR(ops.rms_norm(*xt, width, weight, eps, *out));
  return calib_download(ops, *out);
}

Result<std::vector<float>> run_rope(CalibOps& ops, const std::vector<float>& x, int64_t rows,
                                    int64_t heads, int64_t head_dim, const std::vector<float>& c,
                                    const std::vector<float>& s, int64_t half, RopeStyle style) {
  LATHE_ASSIGN_OR_RETURN(CalibTensorPtr xt, calib_upload(ops, x.data(), rows, heads * head_dim));
  LATHE_ASSIGN_OR_RETURN(CalibTensorPtr ct, calib_upload(ops, c.data(), rows, half));
  LATHE_ASSIGN_OR_RETURN(CalibTensorPtr st, calib_upload(ops, s.data(), rows, half));
  LATHE_RETURN_IF_ERROR(ops.rope(*xt, heads, head_dim, *ct, *st, style));
  return calib_download(ops, *xt);
}

// The rotation calib_ops.h defines, written out: pair i of a head is (i, i + half) (neox) or
// (2i, 2i + 1) (interleaved) with half = the tables' width; the dimensions past the pairs stay.
std::vector<float> rope_reference(std::vector<float> x, int64_t rows, int64_t heads,
                                  int64_t head_dim, const std::vector<float>& c,
                                  const std::vector<float>& s, int64_t half, RopeStyle style) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x.data() + (r * heads + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const int64_t a = style == RopeStyle::kNeox ? i : 2 * i;
        const int64_t b = style == RopeStyle::kNeox ? i + half : 2 * i + 1;
        const float x0 = v[a], x1 = v[b];
        const float ci = c[static_cast<size_t>(r * half + i)];
        const float si = s[static_cast<size_t>(r * half + i)];
        // Each product rounded on its own (no fused multiply-add on any host).
        const volatile float p0 = x0 * ci, p1 = x1 * si, p2 = x1 * ci, p3 = x0 * si;
        v[a] = p0 - p1;
        v[b] = p2 + p3;
      }
    }
  return x;
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

  // The peak counts tensors and kept buffers; a destroyed tensor's bytes are given back.
  void name_and_peak() {
    LATHE_REQUIRE_GPU();
    std::unique_ptr<CalibOps> ops = gpu_ops();
    QVERIFY2(ops->name().rfind("cuda:0 ", 0) == 0, ops->name().c_str());
    QCOMPARE(ops->peak_device_bytes(), int64_t{0});
    CalibLinear l;
    l.n = 8;
    l.k = 16;
    l.w = random_floats(8 * 16, 1);
    Result<std::vector<float>> y = run_linear(*ops, random_floats(4 * 16, 2), 4, l);
    LATHE_QVERIFY_RESULT(y);
    QVERIFY(ops->peak_device_bytes() >= (8 * 16 + 4 * 16 + 4 * 8) * 4);
    const int64_t rows = 16 << 20, before = ops->peak_device_bytes();  // 64 MiB tensors
    for (int i = 0; i < 3; ++i) {
      LATHE_QASSIGN(CalibTensorPtr t, ops->alloc(rows, 1));
      QCOMPARE(t->rows(), rows);
    }
    QVERIFY2(ops->peak_device_bytes() <= before + rows * 4,
             qPrintable(QString("peak %1 after three 64 MiB tensors one at a time (before: %2)")
                            .arg(ops->peak_device_bytes())
                            .arg(before)));
    QVERIFY(ops->peak_device_bytes() >= rows * 4);
  }

  void upload_download_and_gather() {
    LATHE_REQUIRE_GPU();
    std::unique_ptr<CalibOps> gpu = gpu_ops(), cpu = make_cpu_calib_ops();
    const int64_t rows = 300, cols = 77;
    const std::vector<float> x = random_floats(static_cast<size_t>(rows * cols), 3);
    LATHE_QASSIGN(CalibTensorPtr t, calib_upload(*gpu, x.data(), rows, cols));
    QCOMPARE(t->rows(), rows);
    QCOMPARE(t->cols(), cols);
    LATHE_QASSIGN(const std::vector<float> all, calib_download(*gpu, *t));
    QVERIFY(all == x);
    // A range of rows, and the ranges that do not exist.
    std::vector<float> part(static_cast<size_t>(41 * cols), NAN);
    LATHE_QVERIFY_OK(gpu->download(*t, 250, 41, part.data()));
    QVERIFY(part == std::vector<float>(x.begin() + 250 * cols, x.begin() + 291 * cols));
    LATHE_QVERIFY_OK(gpu->download(*t, rows, 0, part.data()));
    for (auto [row0, count] :
         std::vector<std::pair<int64_t, int64_t>>{{290, 11}, {-1, 2}, {3, -1}}) {
      const Status st = gpu->download(*t, row0, count, part.data());
      QCOMPARE(st.code(), ErrorCode::kInvalidArgument);
    }
    // gather_rows: repeats, the first and last rows, against the CPU's.
    const std::vector<int64_t> pick = {5, 0, rows - 1, 5, 42, 170};
    LATHE_QASSIGN(CalibTensorPtr c, calib_upload(*cpu, x.data(), rows, cols));
    LATHE_QASSIGN(CalibTensorPtr gg, gpu->gather_rows(*t, pick));
    LATHE_QASSIGN(CalibTensorPtr cg, cpu->gather_rows(*c, pick));
    QCOMPARE(gg->rows(), int64_t{6});
    QCOMPARE(gg->cols(), cols);
    LATHE_QASSIGN(const std::vector<float> got, calib_download(*gpu, *gg));
    LATHE_QASSIGN(const std::vector<float> want, calib_download(*cpu, *cg));
    QVERIFY(got == want);
    for (size_t i = 0; i < pick.size(); ++i)
      QVERIFY(std::memcmp(got.data() + i * cols, x.data() + pick[i] * cols, cols * 4) == 0);
    for (const std::vector<int64_t>& bad : std::vector<std::vector<int64_t>>{{0, rows}, {-1}}) {
      Result<CalibTensorPtr> r = gpu->gather_rows(*t, bad);
      QVERIFY(!r.is_ok());
      QCOMPARE(r.status().code(), ErrorCode::kInvalidArgument);
    }
  }

  // A tensor larger than the device: kResourceExhausted that names it and what to do; the ops
  // work on afterwards.
  void huge_alloc_is_resource_exhausted() {
    LATHE_REQUIRE_GPU();
    std::unique_ptr<CalibOps> gpu = gpu_ops();
    Result<CalibTensorPtr> r = gpu->alloc(int64_t{1} << 40, 1024);  // 4 PiB
    QVERIFY(!r.is_ok());
    QCOMPARE(r.status().code(), ErrorCode::kResourceExhausted);
    const std::string m = r.status().message();
    for (const char* part :
         {"[1099511627776, 1024]", "free", "--num-samples", "--seq-len", "--device cpu", "cuda:0"})
      QVERIFY2(m.find(part) != std::string::npos, m.c_str());
    Result<CalibTensorPtr> overflow = gpu->alloc(int64_t{1} << 62, int64_t{1} << 20);
    QVERIFY(!overflow.is_ok());
    QCOMPARE(overflow.status().code(), ErrorCode::kResourceExhausted);
    QCOMPARE(gpu->alloc(-1, 4).status().code(), ErrorCode::kInvalidArgument);
    CalibLinear l{random_floats(6, 4), {}, 2, 3};
    LATHE_QVERIFY_RESULT(run_linear(*gpu, random_floats(15, 5), 5, l));
  }

  // Tensors of 0 rows or 0 columns through every op, as the CPU's.
  void zero_size_tensors() {
    LATHE_REQUIRE_GPU();
    std::unique_ptr<CalibOps> gpu = gpu_ops(), cpu = make_cpu_calib_ops();
    for (CalibOps* ops : {gpu.get(), cpu.get()}) {
      const QString who = QString::fromStdString(ops->name());
      LATHE_QASSIGN(CalibTensorPtr e0, ops->alloc(0, 64));
      LATHE_QASSIGN(CalibTensorPtr e1, ops->alloc(0, 64));
      LATHE_QASSIGN(CalibTensorPtr n0, ops->alloc(16, 0));
      LATHE_QASSIGN(CalibTensorPtr z, ops->alloc(0, 0));
      QCOMPARE(e0->size(), int64_t{0});
      LATHE_QVERIFY_OK(ops->upload(nullptr, *e0));
      LATHE_QVERIFY_OK(ops->upload(nullptr, *n0));
      LATHE_QVERIFY_OK(ops->upload(nullptr, *z));
      LATHE_QVERIFY_OK(ops->download(*e0, 0, 0, nullptr));
      LATHE_QVERIFY_OK(ops->download(*n0, 3, 10, nullptr));
      LATHE_QASSIGN(const std::vector<float> d, calib_download(*ops, *n0));
      QVERIFY(d.empty());
      const std::vector<float> w64(64, 1.f);
      LATHE_QVERIFY_OK(ops->rms_norm(*e0, 64, w64, 1e-6f, *e1));
      LATHE_QVERIFY_OK(ops->rms_norm(*e0, 16, std::vector<float>(16, 1.f), 1e-6f, *e0));
      LATHE_QVERIFY_OK(ops->add(*e0, *e1));
      LATHE_QVERIFY_OK(ops->add(*n0, *n0));
      LATHE_QVERIFY_OK(ops->divide_columns(*e0, w64));
      LATHE_QVERIFY_OK(ops->divide_columns(*n0, {}));
      LATHE_QASSIGN(CalibTensorPtr cs, ops->alloc(0, 32));
      LATHE_QVERIFY_OK(ops->rope(*e0, 1, 64, *cs, *cs, RopeStyle::kNeox));
      CalibLinear l{random_floats(64 * 8, 6), random_floats(8, 7), 8, 64};
      LATHE_QASSIGN(CalibTensorPtr y0, ops->alloc(0, 8));
      LATHE_QVERIFY_OK(ops->linear(*e0, l, *y0));
      CalibLinear l0{{}, random_floats(8, 8), 8, 0};  // k = 0: the bias alone
      LATHE_QASSIGN(CalibTensorPtr y1, nan_tensor(*ops, 16, 8));
      LATHE_QVERIFY_OK(ops->linear(*n0, l0, *y1));
      LATHE_QASSIGN(const std::vector<float> bias_rows, calib_download(*ops, *y1));
      for (int64_t r = 0; r < 16; ++r)
        QVERIFY2(std::memcmp(bias_rows.data() + r * 8, l0.bias.data(), 32) == 0, qPrintable(who));
      CalibLinear gate{random_floats(64 * 8, 9), {}, 8, 64},
          up{random_floats(64 * 8, 10), {}, 8, 64};
      LATHE_QVERIFY_OK(ops->mlp_act(*e0, gate, up, *y0));
      CalibAttentionShape s{2, 1, 32, 0};
      LATHE_QASSIGN(CalibTensorPtr kv, ops->alloc(0, 32));
      LATHE_QVERIFY_OK(ops->attention(layout_of({}), s, *e0, *kv, *kv, *e1));
      LATHE_QVERIFY_OK(ops->attention(layout_of({0, 0}), s, *e0, *kv, *kv, *e1));
      LATHE_QASSIGN(const std::vector<double> h, ops->hessian(*e0, 0));
      QVERIFY2(h == std::vector<double>(64 * 64, 0.0), qPrintable(who));
      LATHE_QASSIGN(const std::vector<double> h0, ops->hessian(*n0, 16));
      QVERIFY(h0.empty());
      LATHE_QASSIGN(const std::vector<float> means, ops->column_abs_mean(*e0, 0));
      QVERIFY2(means == std::vector<float>(64, 0.f), qPrintable(who));
      LATHE_QASSIGN(const std::vector<float> none, ops->column_abs_mean(*n0, 16));
      QVERIFY(none.empty());
      LATHE_QASSIGN(const double sd, ops->squared_difference(*e0, *e1));
      QCOMPARE(sd, 0.0);
      LATHE_QASSIGN(CalibTensorPtr g0, ops->gather_rows(*e0, {}));
      QCOMPARE(g0->rows(), int64_t{0});
      QCOMPARE(g0->cols(), int64_t{64});
      LATHE_QASSIGN(CalibTensorPtr g1, ops->gather_rows(*n0, {3, 15}));
      QCOMPARE(g1->rows(), int64_t{2});
      QCOMPARE(g1->cols(), int64_t{0});
      LATHE_QVERIFY_OK(ops->sync());
    }
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
        Result<std::vector<float>> want = run_linear(*cpu, x, s.rows, l);
        Result<std::vector<float>> got = run_linear(*gpu, x, s.rows, l);
        LATHE_QVERIFY_RESULT(want);
        LATHE_QVERIFY_RESULT(got);
        const double e = rel_l2(*got, *want);
        QVERIFY2(e <= 1e-5, qPrintable(QString("rows %1 n %2 k %3 bias %4: rel err %5")
                                           .arg(s.rows)
                                           .arg(s.n)
                                           .arg(s.k)
                                           .arg(bias)
                                           .arg(e)));
      }
    // Shapes that do not fit: the weight's size, x's width, y's shape, y = x.
    CalibLinear l{random_floats(12, 1), {}, 3, 4};
    LATHE_QASSIGN(CalibTensorPtr x, gpu->alloc(5, 4));
    LATHE_QASSIGN(CalibTensorPtr y, gpu->alloc(5, 3));
    LATHE_QASSIGN(CalibTensorPtr sq, gpu->alloc(5, 4));
    CalibLinear short_w{random_floats(11, 1), {}, 3, 4};
    QCOMPARE(gpu->linear(*x, short_w, *y).code(), ErrorCode::kInvalidArgument);
    QCOMPARE(gpu->linear(*y, l, *y).code(), ErrorCode::kInvalidArgument);
    QCOMPARE(gpu->linear(*x, l, *sq).code(), ErrorCode::kInvalidArgument);
    CalibLinear square{random_floats(16, 1), {}, 4, 4};
    QCOMPARE(gpu->linear(*sq, square, *sq).code(), ErrorCode::kInvalidArgument);
  }

  // linear_t (AWQ's products with a weight tensor) as the CPU's.
  void linear_t_matches_cpu() {
    LATHE_REQUIRE_GPU();
    std::unique_ptr<CalibOps> gpu = gpu_ops(), cpu = make_cpu_calib_ops();
    const int64_t rows = 129, n = 300, k = 257;
    const std::vector<float> x = random_floats(static_cast<size_t>(rows * k), 31);
    const std::vector<float> w = random_floats(static_cast<size_t>(n * k), 32);
    std::vector<float> out[2];
    CalibOps* both[2] = {cpu.get(), gpu.get()};
    for (int i = 0; i < 2; ++i) {
      LATHE_QASSIGN(CalibTensorPtr xt, calib_upload(*both[i], x.data(), rows, k));
      LATHE_QASSIGN(CalibTensorPtr wt, calib_upload(*both[i], w.data(), n, k));
      LATHE_QASSIGN(CalibTensorPtr yt, nan_tensor(*both[i], rows, n));
      LATHE_QVERIFY_OK(both[i]->linear_t(*xt, *wt, *yt));
      LATHE_QASSIGN(out[i], calib_download(*both[i], *yt));
    }
    const double e = rel_l2(out[1], out[0]);
    QVERIFY2(e <= 1e-5, qPrintable(QString("rel err %1").arg(e)));
  }

  // One linear of 40000 rows x 2048 (320 MiB in, 320 MiB out, one SGEMM): ranges of rows
  // downloaded on their own against the CPU's product of those rows.
  void linear_large() {
    LATHE_REQUIRE_GPU();
    std::unique_ptr<CalibOps> gpu = gpu_ops(), cpu = make_cpu_calib_ops();
    const int64_t rows = 40000, n = 2048, k = 2048;
    CalibLinear l;
    l.n = n;
    l.k = k;
    l.w = fast_random(static_cast<size_t>(n * k), 5);
    l.bias = fast_random(static_cast<size_t>(n), 6);
    const std::vector<float> x = fast_random(static_cast<size_t>(rows * k), 7);
    LATHE_QASSIGN(CalibTensorPtr xt, calib_upload(*gpu, x.data(), rows, k));
    LATHE_QASSIGN(CalibTensorPtr yt, nan_tensor(*gpu, rows, n));
    LATHE_QVERIFY_OK(gpu->linear(*xt, l, *yt));
    for (int64_t r0 : {int64_t{0}, int64_t{32700}, int64_t{rows - 64}}) {
      const int64_t m = r0 == 32700 ? 200 : 64;
      const std::vector<float> xs(x.begin() + r0 * k, x.begin() + (r0 + m) * k);
      Result<std::vector<float>> want = run_linear(*cpu, xs, m, l);
      LATHE_QVERIFY_RESULT(want);
      std::vector<float> got(static_cast<size_t>(m * n), NAN);
      LATHE_QVERIFY_OK(gpu->download(*yt, r0, m, got.data()));
      const double e = rel_l2(got, *want);
      QVERIFY2(e <= 1e-5, qPrintable(QString("rows %1..: rel err %2").arg(r0).arg(e)));
    }
  }

  // The MLP's SwiGLU activation: up's output in one piece and (30000 rows of 5632 floats, more
  // than 512 MiB) in several; with and without biases; a gate and up that do not match are
  // refused.
  void mlp_act_matches_cpu() {
    LATHE_REQUIRE_GPU();
    std::unique_ptr<CalibOps> gpu = gpu_ops(), cpu = make_cpu_calib_ops();
    struct Shape {
      int64_t rows, ff, k;
    };
    uint32_t seed = 40;
    for (const Shape& s :
         {Shape{1, 3, 5}, Shape{300, 704, 256}, Shape{16384, 5632, 2048}, Shape{30000, 5632, 64}})
      for (bool bias : {false, true}) {
        if (bias && s.rows > 1000 && s.k > 64) continue;
        CalibLinear gate{fast_random(static_cast<size_t>(s.ff * s.k), ++seed), {}, s.ff, s.k};
        CalibLinear up{fast_random(static_cast<size_t>(s.ff * s.k), ++seed), {}, s.ff, s.k};
        if (bias) {
          gate.bias = fast_random(static_cast<size_t>(s.ff), ++seed);
          up.bias = fast_random(static_cast<size_t>(s.ff), ++seed);
        }
        const std::vector<float> x = fast_random(static_cast<size_t>(s.rows * s.k), ++seed);
        Result<std::vector<float>> want = run_mlp_act(*cpu, x, s.rows, gate, up);
        Result<std::vector<float>> got = run_mlp_act(*gpu, x, s.rows, gate, up);
        LATHE_QVERIFY_RESULT(want);
        LATHE_QVERIFY_RESULT(got);
        const double e = rel_l2(*got, *want);
        QVERIFY2(e <= 1e-5, qPrintable(QString("rows %1 ff %2 k %3 bias %4: rel err %5")
                                           .arg(s.rows)
                                           .arg(s.ff)
                                           .arg(s.k)
                                           .arg(bias)
                                           .arg(e)));
      }
    CalibLinear gate{fast_random(12, 1), {}, 3, 4}, up{fast_random(15, 2), {}, 3, 5};
    LATHE_QASSIGN(CalibTensorPtr x, gpu->alloc(4, 4));
    LATHE_QASSIGN(CalibTensorPtr m, gpu->alloc(4, 3));
    const Status st = gpu->mlp_act(*x, gate, up, *m);
    QCOMPARE(static_cast<int>(st.code()), static_cast<int>(ErrorCode::kInvalidArgument));
    QVERIFY2(st.message().find("not two linears of one MLP") != std::string::npos,
             st.message().c_str());
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
        {{300, 200, 129}, 32, 8, 128, 0}, {{50}, 3, 3, 18, 0},
        {{20, 0, 31}, 4, 2, 64, 0}};  // an empty sample
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
      Result<std::vector<float>> want = run_attention(*cpu, layout, s, q, k, v);
      Result<std::vector<float>> got = run_attention(*gpu, layout, s, q, k, v);
      LATHE_QVERIFY_RESULT(want);
      LATHE_QVERIFY_RESULT(got);
      double worst = 0;
      for (size_t i = 0; i < want->size(); ++i)
        worst = std::max(worst, static_cast<double>(std::fabs((*got)[i] - (*want)[i])));
      const double e = rel_l2(*got, *want);
      QVERIFY2(e <= 1e-5 && worst <= 1e-4,
               qPrintable(QString("heads %1/%2 dim %3 window %4: rel err %5, worst %6")
                              .arg(c.nh)
                              .arg(c.nkv)
                              .arg(c.hd)
                              .arg(c.window)
                              .arg(e)
                              .arg(worst)));
    }
    // head_dim past the kernel's limit: kUnsupported.
    const CalibLayout one = layout_of({2});
    CalibAttentionShape big{1, 1, 512, 0};
    Result<std::vector<float>> r =
        run_attention(*gpu, one, big, std::vector<float>(1024), std::vector<float>(1024),
                      std::vector<float>(1024));
    QVERIFY(!r.is_ok());
    QCOMPARE(r.status().code(), ErrorCode::kUnsupported);
  }

  // rms_norm over whole rows and, as QK norm uses it, per head (width < cols); into another tensor
  // and in place.
  void rms_norm_matches_cpu() {
    LATHE_REQUIRE_GPU();
    std::unique_ptr<CalibOps> gpu = gpu_ops(), cpu = make_cpu_calib_ops();
    struct Case {
      int64_t rows, cols, width;
      float eps;
    };
    uint32_t seed = 200;
    for (const Case& c :
         {Case{37, 4096, 4096, 1e-5f}, Case{300, 8 * 128, 128, 1e-6f}, Case{5, 3 * 80, 80, 1e-6f},
          Case{1, 7, 7, 1e-5f}, Case{64, 2 * 256, 256, 1e-6f}})
      for (bool in_place : {false, true}) {
        // Uneven magnitudes per row.
        std::vector<float> x = random_floats(static_cast<size_t>(c.rows * c.cols), ++seed, -3, 3);
        for (int64_t r = 0; r < c.rows; ++r)
          for (int64_t j = 0; j < c.cols; ++j) x[r * c.cols + j] *= 1.f + static_cast<float>(r % 5);
        const std::vector<float> w =
            random_floats(static_cast<size_t>(c.width), ++seed, 0.5f, 1.5f);
        Result<std::vector<float>> want =
            run_rms_norm(*cpu, x, c.rows, c.cols, c.width, w, c.eps, in_place);
        Result<std::vector<float>> got =
            run_rms_norm(*gpu, x, c.rows, c.cols, c.width, w, c.eps, in_place);
        LATHE_QVERIFY_RESULT(want);
        LATHE_QVERIFY_RESULT(got);
        const int64_t ulps = max_ulps(*got, *want);
        QVERIFY2(ulps <= 2, qPrintable(QString("[%1, %2] width %3 in place %4: %5 ulps")
                                           .arg(c.rows)
                                           .arg(c.cols)
                                           .arg(c.width)
                                           .arg(in_place)
                                           .arg(ulps)));
      }
    LATHE_QASSIGN(CalibTensorPtr x, gpu->alloc(3, 10));
    QCOMPARE(gpu->rms_norm(*x, 4, std::vector<float>(4), 1e-6f, *x).code(),
             ErrorCode::kInvalidArgument);
    QCOMPARE(gpu->rms_norm(*x, 5, std::vector<float>(4), 1e-6f, *x).code(),
             ErrorCode::kInvalidArgument);
  }

  // RoPE in both styles, bit for bit as the CPU and as the rotation written out; a table that is
  // not head_dim / 2 wide (partial rotary, which the engine refuses) is refused.
  void rope_matches_cpu() {
    LATHE_REQUIRE_GPU();
    std::unique_ptr<CalibOps> gpu = gpu_ops(), cpu = make_cpu_calib_ops();
    struct Case {
      int64_t heads, head_dim, half;
    };
    const CalibLayout layout = layout_of({17, 100, 3});
    const int64_t rows = layout.rows();
    uint32_t seed = 300;
    for (const Case& c : {Case{4, 64, 32}, Case{8, 128, 64}, Case{3, 80, 40}, Case{1, 6, 3}})
      for (RopeStyle style : {RopeStyle::kNeox, RopeStyle::kInterleaved}) {
        std::vector<float> cs(static_cast<size_t>(rows * c.half)), sn(cs.size());
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t i = 0; i < c.half; ++i) {
            const float inv = std::pow(10000.f, -static_cast<float>(i) / c.half);
            const float angle = static_cast<float>(layout.positions[r]) * inv;
            cs[r * c.half + i] = static_cast<float>(std::cos(static_cast<double>(angle)));
            sn[r * c.half + i] = static_cast<float>(std::sin(static_cast<double>(angle)));
          }
        const std::vector<float> x =
            random_floats(static_cast<size_t>(rows * c.heads * c.head_dim), ++seed, -4, 4);
        const QString what = QString("%1 heads of %2, %3 pairs, %4")
                                 .arg(c.heads)
                                 .arg(c.head_dim)
                                 .arg(c.half)
                                 .arg(style == RopeStyle::kNeox ? "neox" : "interleaved");
        const std::vector<float> ref =
            rope_reference(x, rows, c.heads, c.head_dim, cs, sn, c.half, style);
        Result<std::vector<float>> got =
            run_rope(*gpu, x, rows, c.heads, c.head_dim, cs, sn, c.half, style);
        Result<std::vector<float>> want =
            run_rope(*cpu, x, rows, c.heads, c.head_dim, cs, sn, c.half, style);
        LATHE_QVERIFY_RESULT(got);
        LATHE_QVERIFY_RESULT(want);
        QVERIFY2(max_ulps(*got, ref) == 0, qPrintable(what + ": GPU vs the rotation written out"));
        QVERIFY2(max_ulps(*want, ref) == 0, qPrintable(what + ": CPU vs the rotation written out"));
      }
    LATHE_QASSIGN(CalibTensorPtr x, gpu->alloc(3, 2 * 8));
    LATHE_QASSIGN(CalibTensorPtr wide, gpu->alloc(3, 5));  // 10 rotary dims > head_dim 8
    QCOMPARE(gpu->rope(*x, 2, 8, *wide, *wide, RopeStyle::kNeox).code(),
             ErrorCode::kInvalidArgument);
    LATHE_QASSIGN(CalibTensorPtr partial, gpu->alloc(3, 2));  // 4 rotary dims < head_dim 8
    QCOMPARE(gpu->rope(*x, 2, 8, *partial, *partial, RopeStyle::kNeox).code(),
             ErrorCode::kInvalidArgument);
    LATHE_QASSIGN(CalibTensorPtr short_t, gpu->alloc(2, 4));  // rows differ
    QCOMPARE(gpu->rope(*x, 2, 8, *short_t, *short_t, RopeStyle::kNeox).code(),
             ErrorCode::kInvalidArgument);
  }

  // add, divide_columns: bit for bit; shape mismatches refused.
  void add_and_divide_match_cpu() {
    LATHE_REQUIRE_GPU();
    std::unique_ptr<CalibOps> gpu = gpu_ops(), cpu = make_cpu_calib_ops();
    const int64_t rows = 1000, cols = 333;
    const std::vector<float> a = random_floats(static_cast<size_t>(rows * cols), 400, -50, 50);
    const std::vector<float> b = random_floats(static_cast<size_t>(rows * cols), 401, -1, 1);
    std::vector<float> s = random_floats(static_cast<size_t>(cols), 402, 0.01f, 3.f);
    s[7] = -0.3f;
    std::vector<float> out[2];
    CalibOps* both[2] = {cpu.get(), gpu.get()};
    for (int i = 0; i < 2; ++i) {
      LATHE_QASSIGN(CalibTensorPtr x, calib_upload(*both[i], a.data(), rows, cols));
      LATHE_QASSIGN(CalibTensorPtr y, calib_upload(*both[i], b.data(), rows, cols));
      LATHE_QVERIFY_OK(both[i]->add(*x, *y));
      LATHE_QVERIFY_OK(both[i]->add(*x, *x));  // x = 2 (a + b)
      LATHE_QVERIFY_OK(both[i]->divide_columns(*x, s));
      LATHE_QASSIGN(out[i], calib_download(*both[i], *x));
    }
    QCOMPARE(max_ulps(out[1], out[0]), int64_t{0});
    QCOMPARE(out[1][5 * cols + 7], 2.f * (a[5 * cols + 7] + b[5 * cols + 7]) / -0.3f);
    LATHE_QASSIGN(CalibTensorPtr x, gpu->alloc(4, 5));
    LATHE_QASSIGN(CalibTensorPtr y, gpu->alloc(5, 4));
    QCOMPARE(gpu->add(*x, *y).code(), ErrorCode::kInvalidArgument);
    QCOMPARE(gpu->divide_columns(*x, std::vector<float>(4, 1.f)).code(),
             ErrorCode::kInvalidArgument);
  }

  // AWQ's statistics and losses: column_abs_mean over the first n rows, squared_difference.
  void reductions_match_cpu() {
    LATHE_REQUIRE_GPU();
    std::unique_ptr<CalibOps> gpu = gpu_ops(), cpu = make_cpu_calib_ops();
    struct Shape {
      int64_t rows, cols;
    };
    uint64_t seed = 500;
    for (const Shape& sh : {Shape{3000, 300}, Shape{70000, 64}, Shape{5, 5000}, Shape{1, 1}}) {
      const std::vector<float> a = activations(sh.rows, sh.cols, ++seed);
      std::vector<float> b = a;
      const std::vector<float> noise = fast_random(b.size(), ++seed);
      for (size_t i = 0; i < b.size(); ++i) b[i] += 1e-3f * noise[i];
      LATHE_QASSIGN(CalibTensorPtr ga, calib_upload(*gpu, a.data(), sh.rows, sh.cols));
      LATHE_QASSIGN(CalibTensorPtr gb, calib_upload(*gpu, b.data(), sh.rows, sh.cols));
      LATHE_QASSIGN(CalibTensorPtr ca, calib_upload(*cpu, a.data(), sh.rows, sh.cols));
      LATHE_QASSIGN(CalibTensorPtr cb, calib_upload(*cpu, b.data(), sh.rows, sh.cols));
      for (int64_t n : {sh.rows, sh.rows / 2 + 1, int64_t{0}}) {
        LATHE_QASSIGN(const std::vector<float> got, gpu->column_abs_mean(*ga, n));
        LATHE_QASSIGN(const std::vector<float> want, cpu->column_abs_mean(*ca, n));
        const int64_t ulps = max_ulps(got, want);
        QVERIFY2(
            ulps <= 2,
            qPrintable(
                QString("[%1, %2], n %3: %4 ulps").arg(sh.rows).arg(sh.cols).arg(n).arg(ulps)));
      }
      LATHE_QASSIGN(const double got, gpu->squared_difference(*ga, *gb));
      LATHE_QASSIGN(const double want, cpu->squared_difference(*ca, *cb));
      QVERIFY2(want > 0 && std::fabs(got - want) <= 1e-10 * want,
               qPrintable(QString("[%1, %2]: %3 vs %4")
                              .arg(sh.rows)
                              .arg(sh.cols)
                              .arg(got, 0, 'g', 17)
                              .arg(want, 0, 'g', 17)));
      LATHE_QASSIGN(const double zero, gpu->squared_difference(*ga, *ga));
      QCOMPARE(zero, 0.0);
    }
    LATHE_QASSIGN(CalibTensorPtr x, gpu->alloc(4, 5));
    LATHE_QASSIGN(CalibTensorPtr y, gpu->alloc(5, 4));
    QCOMPARE(gpu->squared_difference(*x, *y).status().code(), ErrorCode::kInvalidArgument);
    QCOMPARE(gpu->column_abs_mean(*x, 5).status().code(), ErrorCode::kInvalidArgument);
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
      Result<std::vector<double>> want = run_hessian(*cpu, x, s.rows, s.k, s.n);
      Result<std::vector<double>> got = run_hessian(*gpu, x, s.rows, s.k, s.n);
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
    Result<std::vector<double>> want = run_hessian(*cpu, x, n, k, n);
    Result<std::vector<double>> got = run_hessian(*gpu, x, n, k, n);
    QVERIFY(!want.is_ok() && !got.is_ok());
    QCOMPARE(got.status().code(), want.status().code());
    QCOMPARE(QString::fromStdString(got.status().message()),
             QString::fromStdString(want.status().message()));
    QVERIFY(got.status().message().find("row 1700, feature 33") != std::string::npos);
    // Rows after n are not read.
    LATHE_QVERIFY_RESULT(run_hessian(*gpu, x, n, k, 1700));
    // n past the tensor's rows.
    QCOMPARE(run_hessian(*gpu, x, n, k, n + 1).status().code(), ErrorCode::kInvalidArgument);
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
      Result<std::vector<double>> h = run_hessian(*cpu, x, n, t.cols, n);
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
    Result<std::vector<double>> h = run_hessian(*cpu, x, n, cols, n);
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
      LATHE_QASSIGN(CalibTensorPtr xt, calib_upload(*gpu, x.data(), n, s.cols));
      LATHE_QVERIFY_OK(gpu->sync());
      auto t0 = std::chrono::steady_clock::now();
      Result<std::vector<double>> h = gpu->hessian(*xt, n);
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
