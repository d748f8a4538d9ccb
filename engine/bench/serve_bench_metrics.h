// The numbers `lathe bench serve` reports, computed as vLLM's benchmark_serving computes them
// (calculate_metrics), so they compare with published vLLM / SGLang results:
//   completed / failed requests, duration;
//   request throughput = completed / duration; output throughput = output tokens / duration;
//   total token throughput = (input + output tokens) / duration (successful requests only);
//   TTFT per successful request; TPOT per request with more than one output token =
//   (latency - TTFT) / (output tokens - 1); ITL = every gap between streamed chunks, pooled over
//   requests; E2E latency per successful request;
//   each as mean / median / std / p90 / p99 (numpy's linear-interpolation percentiles; 0 when
//   there are no samples);
//   goodput = completed requests meeting every SLO given (TTFT <= --slo-ttft-ms, TPOT <=
//   --slo-tpot-ms; a request with one output token has TPOT 0) / duration.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/bench/load_generator.h"

namespace lathe {

struct LatencySummary {
  double mean_ms = 0, median_ms = 0, std_ms = 0, p90_ms = 0, p99_ms = 0;
  int64_t count = 0;
};

struct GoodputSlo {
  double ttft_ms = 0;  // 0: no TTFT objective
  double tpot_ms = 0;  // 0: no TPOT objective
  bool any() const { return ttft_ms > 0 || tpot_ms > 0; }
};

struct ServeBenchMetrics {
  int32_t completed = 0;
  int32_t failed = 0;
  double duration_s = 0;
  int64_t total_input_tokens = 0;
  int64_t total_output_tokens = 0;
  double request_throughput = 0;      // req/s
  double request_goodput = 0;         // req/s meeting the SLOs (only with an SLO)
  double output_throughput = 0;       // tok/s
  double total_token_throughput = 0;  // tok/s
  LatencySummary ttft, tpot, itl, e2el;
  std::vector<std::string> errors;  // the distinct error messages of failed requests (first 10)
};

// numpy.percentile(values, q) with linear interpolation; 0 for no values.
double percentile(std::vector<double> values, double q);
LatencySummary summarize_seconds(const std::vector<double>& values_s);

ServeBenchMetrics compute_serve_metrics(const LoadGenResult& result, const GoodputSlo& slo = {});

// vLLM-style report block ("============ Serving Benchmark Result ============").
std::string format_serve_report(const ServeBenchMetrics& m, const GoodputSlo& slo);
// One row per concurrency level of a sweep.
std::string format_sweep_table(const std::vector<int32_t>& levels,
                               const std::vector<ServeBenchMetrics>& rows);

// vLLM's result JSON keys (completed, request_throughput, mean_ttft_ms, p99_itl_ms, ...).
nlohmann::json serve_metrics_json(const ServeBenchMetrics& m);
// Per-request arrays as vLLM writes them (input_lens, output_lens, ttfts, itls, errors).
nlohmann::json per_request_json(const LoadGenResult& result);

}  // namespace lathe
