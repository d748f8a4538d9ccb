#include "engine/runtime/histogram.h"

#include <algorithm>
#include <cmath>

namespace lathe {

Histogram::Histogram(std::vector<double> bounds) {
  data_.bounds = std::move(bounds);
  data_.counts.assign(data_.bounds.size() + 1, 0);
}

void Histogram::observe(double v) {
  if (std::isnan(v)) return;
  const auto it = std::lower_bound(data_.bounds.begin(), data_.bounds.end(), v);
  ++data_.counts[static_cast<size_t>(it - data_.bounds.begin())];
  ++data_.count;
  data_.sum += v;
}

void Histogram::reset() {
  std::fill(data_.counts.begin(), data_.counts.end(), 0);
  data_.count = 0;
  data_.sum = 0.0;
}

double HistogramData::quantile(double q) const {
  if (count == 0 || bounds.empty()) return 0.0;
  q = std::clamp(q, 0.0, 1.0);
  const double rank = q * static_cast<double>(count);
  uint64_t below = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const uint64_t in = counts[i];
    if (in > 0 && static_cast<double>(below + in) >= rank) {
      if (i == bounds.size()) return bounds.back();
      const double lo = i == 0 ? 0.0 : bounds[i - 1];
      const double hi = bounds[i];
      const double frac = (rank - static_cast<double>(below)) / static_cast<double>(in);
      return lo + (hi - lo) * std::clamp(frac, 0.0, 1.0);
    }
    below += in;
  }
  return bounds.back();
}

std::vector<double> ttft_buckets_s() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
          1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
}

std::vector<double> itl_buckets_s() {
  return {0.001, 0.0025, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.075, 0.1,  0.15, 0.2, 0.3,
          0.4,   0.5,    0.75,  1.0,    2.5,  5.0,   7.5,  10.0,  20.0, 40.0, 80.0};
}

std::vector<double> request_latency_buckets_s() {
  return {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
          30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
}

std::vector<double> one_two_five_buckets(double max_value) {
  std::vector<double> out;
  for (double scale = 1.0;; scale *= 10.0) {
    for (double m : {1.0, 2.0, 5.0}) {
      out.push_back(m * scale);
      if (m * scale >= max_value) return out;
    }
  }
}

std::vector<double> power_of_two_buckets(double max_value) {
  std::vector<double> out;
  for (double v = 1.0;; v *= 2.0) {
    out.push_back(v);
    if (v >= max_value) return out;
  }
}

}  // namespace lathe
