#include "engine/quant/quant_timing.h"

#include <chrono>

#include "engine/core/strings.h"

namespace lathe {
namespace {

using Clock = std::chrono::steady_clock;

// Adds the scope's wall seconds to `s` and one call to `calls`.
class Stopwatch {
 public:
  Stopwatch(double* s, int64_t* calls) : s_(s), start_(Clock::now()) { ++*calls; }
  ~Stopwatch() { *s_ += std::chrono::duration<double>(Clock::now() - start_).count(); }
  Stopwatch(const Stopwatch&) = delete;
  Stopwatch& operator=(const Stopwatch&) = delete;

 private:
  double* s_;
  Clock::time_point start_;
};

// Each op is followed by the inner ops' sync(), so an asynchronous op's time lands in its own
// bucket, not in the next op that waits for it (profiling costs that overlap).
class TimedCalibOps final : public CalibOps {
 public:
  TimedCalibOps(std::unique_ptr<CalibOps> inner, QuantTiming* t)
      : inner_(std::move(inner)), t_(t) {}

  std::string name() const override { return inner_->name(); }
  Result<CalibTensorPtr> alloc(int64_t rows, int64_t cols) override {
    return timed(&t_->tensor_s, &t_->tensor_calls, [&] { return inner_->alloc(rows, cols); });
  }
  Status upload(const float* host, CalibTensor& t) override {
    return timed(&t_->tensor_s, &t_->tensor_calls, [&] { return inner_->upload(host, t); });
  }
  Status download(const CalibTensor& t, int64_t row0, int64_t count, float* host) override {
    return timed(&t_->tensor_s, &t_->tensor_calls,
                 [&] { return inner_->download(t, row0, count, host); });
  }
  Result<CalibTensorPtr> gather_rows(const CalibTensor& x,
                                     const std::vector<int64_t>& rows) override {
    return timed(&t_->tensor_s, &t_->tensor_calls, [&] { return inner_->gather_rows(x, rows); });
  }
  Status sync() override { return inner_->sync(); }
  Status rms_norm(const CalibTensor& x, int64_t width, const std::vector<float>& weight, float eps,
                  CalibTensor& out) override {
    return timed(&t_->tensor_s, &t_->tensor_calls,
                 [&] { return inner_->rms_norm(x, width, weight, eps, out); });
  }
  Status rope(CalibTensor& x, int64_t heads, int64_t head_dim, const CalibTensor& cos_t,
              const CalibTensor& sin_t, RopeStyle style) override {
    return timed(&t_->tensor_s, &t_->tensor_calls,
                 [&] { return inner_->rope(x, heads, head_dim, cos_t, sin_t, style); });
  }
  Status add(CalibTensor& x, const CalibTensor& y) override {
    return timed(&t_->tensor_s, &t_->tensor_calls, [&] { return inner_->add(x, y); });
  }
  Status divide_columns(CalibTensor& x, const std::vector<float>& s) override {
    return timed(&t_->tensor_s, &t_->tensor_calls, [&] { return inner_->divide_columns(x, s); });
  }
  Status linear(const CalibTensor& x, const CalibLinear& l, CalibTensor& y) override {
    return timed(&t_->linear_s, &t_->linear_calls, [&] { return inner_->linear(x, l, y); });
  }
  Status mlp_act(const CalibTensor& x, const CalibLinear& gate, const CalibLinear& up,
                 CalibTensor& m) override {
    return timed(&t_->mlp_s, &t_->mlp_calls, [&] { return inner_->mlp_act(x, gate, up, m); });
  }
  Status attention(const CalibLayout& layout, const CalibAttentionShape& shape,
                   const CalibTensor& q, const CalibTensor& k, const CalibTensor& v,
                   CalibTensor& out) override {
    return timed(&t_->attention_s, &t_->attention_calls,
                 [&] { return inner_->attention(layout, shape, q, k, v, out); });
  }
  Result<std::vector<double>> hessian(const CalibTensor& x, int64_t n) override {
    return timed(&t_->hessian_s, &t_->hessian_calls, [&] { return inner_->hessian(x, n); });
  }
  Result<GptqResult> gptq(const float* w, int64_t rows, int64_t cols, const std::vector<double>& h,
                          const GptqConfig& config) override {
    return timed(&t_->gptq_s, &t_->gptq_calls,
                 [&] { return inner_->gptq(w, rows, cols, h, config); });
  }
  Status linear_t(const CalibTensor& x, const CalibTensor& w, CalibTensor& y) override {
    return timed(&t_->linear_s, &t_->linear_calls, [&] { return inner_->linear_t(x, w, y); });
  }
  Status awq_fake_quantize(const CalibTensor& w, const std::vector<float>& s,
                           const IntQuantConfig& quant, CalibTensor& out) override {
    return timed(&t_->awq_s, &t_->awq_calls,
                 [&] { return inner_->awq_fake_quantize(w, s, quant, out); });
  }
  Result<std::vector<float>> awq_clip(const CalibTensor& w, const CalibTensor& xs,
                                      const AwqConfig& config) override {
    return timed(&t_->awq_s, &t_->awq_calls, [&] { return inner_->awq_clip(w, xs, config); });
  }
  Result<std::vector<float>> column_abs_mean(const CalibTensor& x, int64_t n) override {
    return timed(&t_->tensor_s, &t_->tensor_calls, [&] { return inner_->column_abs_mean(x, n); });
  }
  Result<double> squared_difference(const CalibTensor& a, const CalibTensor& b) override {
    return timed(&t_->tensor_s, &t_->tensor_calls,
                 [&] { return inner_->squared_difference(a, b); });
  }
  int64_t peak_device_bytes() const override { return inner_->peak_device_bytes(); }

 private:
  // fn()'s result, its wall time and the sync after it added to *s, one call to *calls; a sync
  // error is the result when fn succeeded.
  template <typename Fn>
  auto timed(double* s, int64_t* calls, Fn&& fn) -> decltype(fn()) {
    Stopwatch w(s, calls);
    auto r = fn();
    const Status st = inner_->sync();
    if (r.is_ok() && !st.is_ok()) return st;
    return r;
  }

  std::unique_ptr<CalibOps> inner_;
  QuantTiming* t_;
};

}  // namespace

std::string QuantTiming::summary() const {
  const double ops = linear_s + mlp_s + attention_s + hessian_s + gptq_s + awq_s + tensor_s;
  return strformat(
      "ops %.1f s (linear %.1f s / %lld calls, mlp %.1f s / %lld, attention %.1f s / %lld, hessian "
      "%.1f s / %lld, "
      "gptq %.1f s / %lld, awq %.1f s / %lld, norms/RoPE/adds/copies %.1f s / %lld); blocks %.1f s "
      "in all (block tensor reads %.1f s, held-out checks %.1f "
      "s); writer loop's source reads %.1f s, writer %.1f s, checkpoints %.1f s",
      ops, linear_s, static_cast<long long>(linear_calls), mlp_s, static_cast<long long>(mlp_calls),
      attention_s, static_cast<long long>(attention_calls), hessian_s,
      static_cast<long long>(hessian_calls), gptq_s, static_cast<long long>(gptq_calls), awq_s,
      static_cast<long long>(awq_calls), tensor_s, static_cast<long long>(tensor_calls), block_s,
      block_read_s, holdout_s, read_s, write_s, checkpoint_s);
}

std::unique_ptr<CalibOps> make_timed_calib_ops(std::unique_ptr<CalibOps> inner,
                                               QuantTiming* timing) {
  return std::make_unique<TimedCalibOps>(std::move(inner), timing);
}

}  // namespace lathe
