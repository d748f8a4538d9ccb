// The CPU CalibOps: tensors are host vectors; float32 products on ThreadPool::global() (cpu_ops.h),
// the attention written out per (sample, head), gptq.h's column loop.
#include "engine/quant/calib_ops.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "engine/backend/cpu/cpu_ops.h"
#include "engine/core/strings.h"
#include "engine/core/thread_pool.h"

namespace lathe {
namespace {

constexpr int64_t kHessianChunkRows = 1024;
constexpr int64_t kMlpChunkRows = 1024;  // rows per gate / up product (no full [rows, ff] buffers)

class CpuTensor final : public CalibTensor {
 public:
  CpuTensor(int64_t rows, int64_t cols)
      : CalibTensor(rows, cols), v(static_cast<size_t>(rows * cols)) {}
  std::vector<float> v;
};

// The host data of a tensor this implementation made (the contract: no other tensor reaches it).
float* data(CalibTensor& t) {
  return static_cast<CpuTensor&>(t).v.data();
}
const float* data(const CalibTensor& t) {
  return static_cast<const CpuTensor&>(t).v.data();
}

// fn(r0, r1) over [0, rows) in ranges on the pool: every op here is independent per row, so
// splitting changes no value.
void for_rows(int64_t rows, const std::function<void(int64_t, int64_t)>& fn) {
  ThreadPool::global().parallel_for(rows, fn);
}

Status same_shape(const CalibTensor& a, const CalibTensor& b, const char* op) {
  if (a.rows() == b.rows() && a.cols() == b.cols()) return Status::ok();
  return invalid_argument(
      strformat("%s: [%lld, %lld] and [%lld, %lld] differ in shape", op,
                static_cast<long long>(a.rows()), static_cast<long long>(a.cols()),
                static_cast<long long>(b.rows()), static_cast<long long>(b.cols())));
}

class CpuCalibOps final : public CalibOps {
 public:
  std::string name() const override {
    return strformat("cpu (%d threads)", ThreadPool::global().num_threads());
  }

  Result<CalibTensorPtr> alloc(int64_t rows, int64_t cols) override {
    if (rows < 0 || cols < 0)
      return invalid_argument(strformat("a calibration tensor cannot be [%lld, %lld]",
                                        static_cast<long long>(rows),
                                        static_cast<long long>(cols)));
    return CalibTensorPtr(std::make_unique<CpuTensor>(rows, cols));
  }

  Status upload(const float* host, CalibTensor& t) override {
    std::copy_n(host, t.size(), data(t));
    return Status::ok();
  }

  Status download(const CalibTensor& t, int64_t row0, int64_t count, float* host) override {
    LATHE_RETURN_IF_ERROR(check_range(t, row0, count));
    std::copy_n(data(t) + row0 * t.cols(), count * t.cols(), host);
    return Status::ok();
  }

  Result<CalibTensorPtr> gather_rows(const CalibTensor& x,
                                     const std::vector<int64_t>& rows) override {
    for (int64_t r : rows) LATHE_RETURN_IF_ERROR(check_range(x, r, 1));
    const int64_t n = static_cast<int64_t>(rows.size()), k = x.cols();
    auto out = std::make_unique<CpuTensor>(n, k);
    for (int64_t i = 0; i < n; ++i)
      std::copy_n(data(x) + rows[static_cast<size_t>(i)] * k, k, out->v.data() + i * k);
    return CalibTensorPtr(std::move(out));
  }

  Status rms_norm(const CalibTensor& x, int64_t width, const std::vector<float>& weight, float eps,
                  CalibTensor& out) override {
    LATHE_RETURN_IF_ERROR(same_shape(x, out, "rms_norm"));
    if (width <= 0 || x.cols() % width != 0 || static_cast<int64_t>(weight.size()) != width)
      return invalid_argument(strformat(
          "rms_norm: runs of %lld over %lld columns with a weight of %zu values",
          static_cast<long long>(width), static_cast<long long>(x.cols()), weight.size()));
    const int64_t per_row = x.cols() / width, c = x.cols();
    const float* xs = data(x);
    float* o = data(out);
    for_rows(x.rows(), [&](int64_t r0, int64_t r1) {
      cpu::rms_norm(xs + r0 * c, weight.data(), (r1 - r0) * per_row, width, eps, o + r0 * c);
    });
    return Status::ok();
  }

  Status rope(CalibTensor& x, int64_t heads, int64_t head_dim, const CalibTensor& cos_t,
              const CalibTensor& sin_t, RopeStyle style) override {
    LATHE_RETURN_IF_ERROR(same_shape(cos_t, sin_t, "rope"));
    if (heads * head_dim != x.cols() || cos_t.rows() != x.rows() || 2 * cos_t.cols() != head_dim)
      return invalid_argument(
          strformat("rope: %lld heads of %lld over [%lld, %lld] with angle tables [%lld, %lld]",
                    static_cast<long long>(heads), static_cast<long long>(head_dim),
                    static_cast<long long>(x.rows()), static_cast<long long>(x.cols()),
                    static_cast<long long>(cos_t.rows()), static_cast<long long>(cos_t.cols())));
    const int64_t c = x.cols(), half = cos_t.cols();
    float* xs = data(x);
    for_rows(x.rows(), [&](int64_t r0, int64_t r1) {
      cpu::rope(xs + r0 * c, r1 - r0, heads, head_dim, data(cos_t) + r0 * half,
                data(sin_t) + r0 * half, style);
    });
    return Status::ok();
  }

  Status add(CalibTensor& x, const CalibTensor& y) override {
    LATHE_RETURN_IF_ERROR(same_shape(x, y, "add"));
    float* xs = data(x);
    const float* ys = data(y);
    ThreadPool::global().parallel_for(x.size(), [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) xs[i] += ys[i];
    });
    return Status::ok();
  }

  Status divide_columns(CalibTensor& x, const std::vector<float>& s) override {
    if (static_cast<int64_t>(s.size()) != x.cols())
      return invalid_argument(strformat("divide_columns: %zu divisors for %lld columns", s.size(),
                                        static_cast<long long>(x.cols())));
    const int64_t k = x.cols();
    float* xs = data(x);
    for_rows(x.rows(), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t j = 0; j < k; ++j) xs[r * k + j] /= s[static_cast<size_t>(j)];
    });
    return Status::ok();
  }

  Status linear(const CalibTensor& x, const CalibLinear& l, CalibTensor& y) override {
    LATHE_RETURN_IF_ERROR(check_linear(x, l, y));
    const TensorView w = make_view(DType::kF32, {l.n, l.k}, l.w.data());
    cpu::linear(data(x), x.rows(), w, l.bias.empty() ? nullptr : l.bias.data(), data(y),
                ThreadPool::global());
    return Status::ok();
  }

  Status mlp_act(const CalibTensor& x, const CalibLinear& gate, const CalibLinear& up,
                 CalibTensor& m) override {
    const int64_t ff = gate.n, hidden = gate.k, rows = x.rows();
    if (up.n != ff || up.k != hidden || x.cols() != hidden || m.rows() != rows || m.cols() != ff)
      return invalid_argument(strformat(
          "mlp_act: gate [%lld, %lld], up [%lld, %lld], input [%lld, %lld] and output [%lld, "
          "%lld] are not one MLP's",
          static_cast<long long>(gate.n), static_cast<long long>(gate.k),
          static_cast<long long>(up.n), static_cast<long long>(up.k),
          static_cast<long long>(x.rows()), static_cast<long long>(x.cols()),
          static_cast<long long>(m.rows()), static_cast<long long>(m.cols())));
    std::vector<float> g, u;
    for (int64_t r0 = 0; r0 < rows; r0 += kMlpChunkRows) {
      const int64_t n = std::min(kMlpChunkRows, rows - r0);
      g.resize(static_cast<size_t>(n * ff));
      u.resize(static_cast<size_t>(n * ff));
      const float* xr = data(x) + r0 * hidden;
      cpu::linear(xr, n, make_view(DType::kF32, {ff, hidden}, gate.w.data()),
                  gate.bias.empty() ? nullptr : gate.bias.data(), g.data(), ThreadPool::global());
      cpu::linear(xr, n, make_view(DType::kF32, {ff, hidden}, up.w.data()),
                  up.bias.empty() ? nullptr : up.bias.data(), u.data(), ThreadPool::global());
      cpu::swiglu(g.data(), u.data(), data(m) + r0 * ff, n * ff);
    }
    return Status::ok();
  }

  Status attention(const CalibLayout& layout, const CalibAttentionShape& s, const CalibTensor& qt,
                   const CalibTensor& kt, const CalibTensor& vt, CalibTensor& outt) override {
    const int64_t hd = s.head_dim, nh = s.num_heads, nkv = s.num_kv_heads;
    if (nh <= 0 || nkv <= 0 || nh % nkv != 0 || hd <= 0 || qt.cols() != nh * hd ||
        kt.cols() != nkv * hd || vt.cols() != nkv * hd || outt.cols() != nh * hd ||
        qt.rows() != layout.rows() || kt.rows() != layout.rows() || vt.rows() != layout.rows() ||
        outt.rows() != layout.rows())
      return invalid_argument(strformat(
          "attention: %lld query heads, %lld kv heads of %lld over q [%lld, %lld] and k [%lld, "
          "%lld] for %lld rows do not make a GQA shape",
          static_cast<long long>(nh), static_cast<long long>(nkv), static_cast<long long>(hd),
          static_cast<long long>(qt.rows()), static_cast<long long>(qt.cols()),
          static_cast<long long>(kt.rows()), static_cast<long long>(kt.cols()),
          static_cast<long long>(layout.rows())));
    const float *q = data(qt), *k = data(kt), *v = data(vt);
    float* out = data(outt);
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const int64_t group = nh / nkv, window = s.sliding_window;
    const int64_t tasks = layout.num_samples() * nh;
    ThreadPool::global().parallel_for(tasks, [&](int64_t t0, int64_t t1) {
      std::vector<float> score;
      for (int64_t task = t0; task < t1; ++task) {
        const int64_t smp = task / nh, h = task % nh, kvh = h / group;
        const int64_t b = layout.start[static_cast<size_t>(smp)];
        const int64_t len = layout.start[static_cast<size_t>(smp) + 1] - b;
        score.resize(static_cast<size_t>(len));
        for (int64_t i = 0; i < len; ++i) {
          const float* qi = q + ((b + i) * nh + h) * hd;
          const int64_t j0 = window > 0 ? std::max<int64_t>(0, i - window + 1) : 0;
          float m = -INFINITY;
          for (int64_t j = j0; j <= i; ++j) {
            const float* kj = k + ((b + j) * nkv + kvh) * hd;
            float d = 0.f;
            for (int64_t e = 0; e < hd; ++e) d += qi[e] * kj[e];
            score[static_cast<size_t>(j)] = d * scale;
            m = std::max(m, d * scale);
          }
          float sum = 0.f;
          for (int64_t j = j0; j <= i; ++j) {
            const float e = std::exp(score[static_cast<size_t>(j)] - m);
            score[static_cast<size_t>(j)] = e;
            sum += e;
          }
          float* o = out + ((b + i) * nh + h) * hd;
          std::fill(o, o + hd, 0.f);
          for (int64_t j = j0; j <= i; ++j) {
            const float* vj = v + ((b + j) * nkv + kvh) * hd;
            const float p = score[static_cast<size_t>(j)] / sum;
            for (int64_t e = 0; e < hd; ++e) o[e] += p * vj[e];
          }
        }
      }
    });
    return Status::ok();
  }

  Result<std::vector<double>> hessian(const CalibTensor& xt, int64_t n) override {
    const int64_t k = xt.cols();
    if (n < 0 || n > xt.rows())
      return invalid_argument(
          strformat("hessian: %lld rows of a [%lld, %lld] input", static_cast<long long>(n),
                    static_cast<long long>(xt.rows()), static_cast<long long>(k)));
    const float* x = data(xt);
    for (int64_t i = 0; i < n * k; ++i)
      if (!std::isfinite(x[i]))
        return invalid_argument(strformat(
            "calibration activations are not finite (row %lld, feature %lld): the source weights "
            "overflow on this text",
            static_cast<long long>(i / k), static_cast<long long>(i % k)));
    std::vector<double> sum(static_cast<size_t>(k * k), 0.0);
    std::vector<float> xt_chunk, y(static_cast<size_t>(k * k));
    for (int64_t r0 = 0; r0 < n; r0 += kHessianChunkRows) {
      const int64_t m = std::min(kHessianChunkRows, n - r0);
      xt_chunk.resize(static_cast<size_t>(k * m));
      for (int64_t r = 0; r < m; ++r)
        for (int64_t j = 0; j < k; ++j)
          xt_chunk[static_cast<size_t>(j * m + r)] = x[(r0 + r) * k + j];
      // y[a, b] = sum over the chunk's rows of x[., a] x[., b]: x^T times (x^T)^T.
      const TensorView w = make_view(DType::kF32, {k, m}, xt_chunk.data());
      cpu::linear(xt_chunk.data(), k, w, nullptr, y.data(), ThreadPool::global());
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += y[i];
    }
    const double f = n > 0 ? 2.0 / static_cast<double>(n) : 0.0;
    for (double& v : sum) v *= f;
    return sum;
  }

  Result<GptqResult> gptq(const float* w, int64_t rows, int64_t cols, const std::vector<double>& h,
                          const GptqConfig& config) override {
    return gptq_quantize(w, rows, cols, h, config);
  }

  Status linear_t(const CalibTensor& x, const CalibTensor& w, CalibTensor& y) override {
    if (x.cols() != w.cols() || y.rows() != x.rows() || y.cols() != w.rows())
      return invalid_argument(
          strformat("linear_t: [%lld, %lld] times [%lld, %lld]^T into [%lld, %lld]",
                    static_cast<long long>(x.rows()), static_cast<long long>(x.cols()),
                    static_cast<long long>(w.rows()), static_cast<long long>(w.cols()),
                    static_cast<long long>(y.rows()), static_cast<long long>(y.cols())));
    const TensorView wv = make_view(DType::kF32, {w.rows(), w.cols()}, data(w));
    cpu::linear(data(x), x.rows(), wv, nullptr, data(y), ThreadPool::global());
    return Status::ok();
  }

  Status awq_fake_quantize(const CalibTensor& w, const std::vector<float>& s,
                           const IntQuantConfig& quant, CalibTensor& out) override {
    LATHE_RETURN_IF_ERROR(same_shape(w, out, "awq_fake_quantize"));
    if (static_cast<int64_t>(s.size()) != w.cols())
      return invalid_argument(strformat("awq_fake_quantize: %zu scales for %lld columns", s.size(),
                                        static_cast<long long>(w.cols())));
    LATHE_ASSIGN_OR_RETURN(std::vector<float> fq,
                           awq_fake_quantize_scaled(data(w), w.rows(), w.cols(), s, quant));
    static_cast<CpuTensor&>(out).v = std::move(fq);
    return Status::ok();
  }

  Result<std::vector<float>> awq_clip(const CalibTensor& w, const CalibTensor& xs,
                                      const AwqConfig& config) override {
    if (xs.cols() != w.cols())
      return invalid_argument("awq_clip: the input rows do not fit the weights");
    return awq_search_clip(data(w), w.rows(), w.cols(), data(xs), xs.rows(), config);
  }

  Result<std::vector<float>> column_abs_mean(const CalibTensor& x, int64_t n) override {
    if (n < 0 || n > x.rows())
      return invalid_argument(strformat("column_abs_mean: %lld rows of %lld",
                                        static_cast<long long>(n),
                                        static_cast<long long>(x.rows())));
    const int64_t k = x.cols();
    const float* xs = data(x);
    std::vector<double> sum(static_cast<size_t>(k), 0.0);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = 0; j < k; ++j) sum[static_cast<size_t>(j)] += std::fabs(xs[r * k + j]);
    std::vector<float> out(static_cast<size_t>(k));
    for (int64_t j = 0; j < k; ++j)
      out[static_cast<size_t>(j)] = static_cast<float>(
          sum[static_cast<size_t>(j)] / static_cast<double>(std::max<int64_t>(n, 1)));
    return out;
  }

  Result<double> squared_difference(const CalibTensor& a, const CalibTensor& b) override {
    LATHE_RETURN_IF_ERROR(same_shape(a, b, "squared_difference"));
    const float *as = data(a), *bs = data(b);
    double e = 0.0;
    for (int64_t i = 0; i < a.size(); ++i) {
      const double d = static_cast<double>(as[i]) - bs[i];
      e += d * d;
    }
    return e;
  }

 private:
  static Status check_range(const CalibTensor& t, int64_t row0, int64_t count) {
    if (row0 >= 0 && count >= 0 && row0 + count <= t.rows()) return Status::ok();
    return invalid_argument(
        strformat("rows %lld .. %lld of a tensor of %lld rows", static_cast<long long>(row0),
                  static_cast<long long>(row0 + count), static_cast<long long>(t.rows())));
  }
  static Status check_linear(const CalibTensor& x, const CalibLinear& l, const CalibTensor& y) {
    if (static_cast<int64_t>(l.w.size()) == l.n * l.k &&
        (l.bias.empty() || static_cast<int64_t>(l.bias.size()) == l.n) && x.cols() == l.k &&
        y.cols() == l.n && y.rows() == x.rows())
      return Status::ok();
    return invalid_argument(strformat(
        "linear: a [%lld, %lld] weight (%zu values, bias %zu) over input [%lld, %lld] into "
        "[%lld, %lld]",
        static_cast<long long>(l.n), static_cast<long long>(l.k), l.w.size(), l.bias.size(),
        static_cast<long long>(x.rows()), static_cast<long long>(x.cols()),
        static_cast<long long>(y.rows()), static_cast<long long>(y.cols())));
  }
};

}  // namespace

std::unique_ptr<CalibOps> make_cpu_calib_ops() {
  return std::make_unique<CpuCalibOps>();
}

Result<CalibTensorPtr> calib_upload(CalibOps& ops, const float* host, int64_t rows, int64_t cols) {
  LATHE_ASSIGN_OR_RETURN(CalibTensorPtr t, ops.alloc(rows, cols));
  LATHE_RETURN_IF_ERROR(ops.upload(host, *t));
  return t;
}

Result<std::vector<float>> calib_download(CalibOps& ops, const CalibTensor& t) {
  std::vector<float> out(static_cast<size_t>(t.size()));
  LATHE_RETURN_IF_ERROR(ops.download(t, 0, t.rows(), out.data()));
  return out;
}

}  // namespace lathe
