// A fixed-bucket histogram with Prometheus semantics: bucket i counts observations v with
// bounds[i-1] < v <= bounds[i]; a last bucket (+Inf) takes everything above the last bound.
// Not thread-safe: MetricsRegistry guards it.
#pragma once

#include <cstdint>
#include <vector>

namespace lathe {

struct HistogramData {
  std::vector<double> bounds;    // ascending upper bounds (le), without +Inf
  std::vector<uint64_t> counts;  // per bucket, not cumulative; bounds.size() + 1 entries
  uint64_t count = 0;
  double sum = 0.0;

  double mean() const { return count > 0 ? sum / static_cast<double>(count) : 0.0; }
  // Estimated q-quantile (q in [0, 1]) by linear interpolation inside the bucket that holds it, as
  // Prometheus' histogram_quantile() does; 0 when empty; the last finite bound for the +Inf bucket.
  double quantile(double q) const;
};

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  void reset();
  const HistogramData& data() const { return data_; }

 private:
  HistogramData data_;
};

// Bucket sets (seconds), from vLLM's metrics, extended below 10 ms for GPU inter-token latencies.
std::vector<double> ttft_buckets_s();
std::vector<double> itl_buckets_s();
std::vector<double> request_latency_buckets_s();
// 1, 2, 5, 10, 20, 50, ... up to and including the first value >= max_value.
std::vector<double> one_two_five_buckets(double max_value);
// 1, 2, 4, 8, ... up to and including the first value >= max_value.
std::vector<double> power_of_two_buckets(double max_value);

}  // namespace lathe
