// The CPU CalibOps: float32 products on ThreadPool::global() (cpu_ops.h), the attention written
// out per (sample, head), gptq.h's column loop.
#include "engine/quant/calib_ops.h"

#include <algorithm>
#include <cmath>

#include "engine/backend/cpu/cpu_ops.h"
#include "engine/core/strings.h"
#include "engine/core/thread_pool.h"

namespace lathe {
namespace {

constexpr int64_t kHessianChunkRows = 1024;
constexpr int64_t kMlpChunkRows = 1024;  // rows per gate / up product (no full [rows, ff] buffers)

class CpuCalibOps final : public CalibOps {
 public:
  std::string name() const override {
    return strformat("cpu (%d threads)", ThreadPool::global().num_threads());
  }

  Status linear(const float* x, int64_t rows, const CalibLinear& l, float* y) override {
    const TensorView w = make_view(DType::kF32, {l.n, l.k}, l.w.data());
    cpu::linear(x, rows, w, l.bias.empty() ? nullptr : l.bias.data(), y, ThreadPool::global());
    return Status::ok();
  }

  Status mlp_act(const float* x, int64_t rows, const CalibLinear& gate, const CalibLinear& up,
                 float* m) override {
    const int64_t ff = gate.n, hidden = gate.k;
    std::vector<float> g, u;
    for (int64_t r0 = 0; r0 < rows; r0 += kMlpChunkRows) {
      const int64_t n = std::min(kMlpChunkRows, rows - r0);
      g.resize(static_cast<size_t>(n * ff));
      u.resize(static_cast<size_t>(n * ff));
      LATHE_RETURN_IF_ERROR(linear(x + r0 * hidden, n, gate, g.data()));
      LATHE_RETURN_IF_ERROR(linear(x + r0 * hidden, n, up, u.data()));
      cpu::swiglu(g.data(), u.data(), m + r0 * ff, n * ff);
    }
    return Status::ok();
  }

  Status attention(const CalibLayout& layout, const CalibAttentionShape& s, const float* q,
                   const float* k, const float* v, float* out) override {
    const int64_t hd = s.head_dim, nh = s.num_heads, nkv = s.num_kv_heads;
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

  Result<std::vector<double>> hessian(const float* x, int64_t n, int64_t k) override {
    for (int64_t i = 0; i < n * k; ++i)
      if (!std::isfinite(x[i]))
        return invalid_argument(strformat(
            "calibration activations are not finite (row %lld, feature %lld): the source weights "
            "overflow on this text",
            static_cast<long long>(i / k), static_cast<long long>(i % k)));
    std::vector<double> sum(static_cast<size_t>(k * k), 0.0);
    std::vector<float> xt, y(static_cast<size_t>(k * k));
    for (int64_t r0 = 0; r0 < n; r0 += kHessianChunkRows) {
      const int64_t m = std::min(kHessianChunkRows, n - r0);
      xt.resize(static_cast<size_t>(k * m));
      for (int64_t r = 0; r < m; ++r)
        for (int64_t j = 0; j < k; ++j) xt[static_cast<size_t>(j * m + r)] = x[(r0 + r) * k + j];
      // y[a, b] = sum over the chunk's rows of x[., a] x[., b]: x^T times (x^T)^T.
      const TensorView w = make_view(DType::kF32, {k, m}, xt.data());
      cpu::linear(xt.data(), k, w, nullptr, y.data(), ThreadPool::global());
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
};

}  // namespace

std::unique_ptr<CalibOps> make_cpu_calib_ops() {
  return std::make_unique<CpuCalibOps>();
}

}  // namespace lathe
