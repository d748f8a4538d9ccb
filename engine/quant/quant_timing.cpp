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

class TimedCalibOps final : public CalibOps {
 public:
  TimedCalibOps(std::unique_ptr<CalibOps> inner, QuantTiming* t)
      : inner_(std::move(inner)), t_(t) {}

  std::string name() const override { return inner_->name(); }
  Status linear(const float* x, int64_t rows, const CalibLinear& l, float* y) override {
    Stopwatch w(&t_->linear_s, &t_->linear_calls);
    return inner_->linear(x, rows, l, y);
  }
  Status mlp_act(const float* x, int64_t rows, const CalibLinear& gate, const CalibLinear& up,
                 float* m) override {
    Stopwatch w(&t_->mlp_s, &t_->mlp_calls);
    return inner_->mlp_act(x, rows, gate, up, m);
  }
  Status attention(const CalibLayout& layout, const CalibAttentionShape& shape, const float* q,
                   const float* k, const float* v, float* out) override {
    Stopwatch w(&t_->attention_s, &t_->attention_calls);
    return inner_->attention(layout, shape, q, k, v, out);
  }
  Result<std::vector<double>> hessian(const float* x, int64_t n, int64_t k) override {
    Stopwatch w(&t_->hessian_s, &t_->hessian_calls);
    return inner_->hessian(x, n, k);
  }
  Result<GptqResult> gptq(const float* w, int64_t rows, int64_t cols, const std::vector<double>& h,
                          const GptqConfig& config) override {
    Stopwatch s(&t_->gptq_s, &t_->gptq_calls);
    return inner_->gptq(w, rows, cols, h, config);
  }
  int64_t peak_device_bytes() const override { return inner_->peak_device_bytes(); }

 private:
  std::unique_ptr<CalibOps> inner_;
  QuantTiming* t_;
};

}  // namespace

std::string QuantTiming::summary() const {
  const double ops = linear_s + mlp_s + attention_s + hessian_s + gptq_s;
  return strformat(
      "ops %.1f s (linear %.1f s / %lld calls, mlp %.1f s / %lld, attention %.1f s / %lld, hessian "
      "%.1f s / %lld, "
      "gptq %.1f s / %lld); blocks %.1f s in all (block tensor reads %.1f s, held-out checks %.1f "
      "s); writer loop's source reads %.1f s, writer %.1f s, checkpoints %.1f s",
      ops, linear_s, static_cast<long long>(linear_calls), mlp_s, static_cast<long long>(mlp_calls),
      attention_s, static_cast<long long>(attention_calls), hessian_s,
      static_cast<long long>(hessian_calls), gptq_s, static_cast<long long>(gptq_calls), block_s,
      block_read_s, holdout_s, read_s, write_s, checkpoint_s);
}

std::unique_ptr<CalibOps> make_timed_calib_ops(std::unique_ptr<CalibOps> inner,
                                               QuantTiming* timing) {
  return std::make_unique<TimedCalibOps>(std::move(inner), timing);
}

}  // namespace lathe
