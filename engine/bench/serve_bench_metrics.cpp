#include "engine/bench/serve_bench_metrics.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <set>

#include "engine/bench/offline_bench.h"
#include "engine/core/strings.h"

namespace lathe {

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return percentile_of_sorted(v, q);
}

LatencySummary summarize_seconds(const std::vector<double>& s) {
  LatencySummary out;
  out.count = static_cast<int64_t>(s.size());
  if (s.empty()) return out;
  double sum = 0;
  for (const double x : s) sum += x;
  const double mean = sum / static_cast<double>(s.size());
  double var = 0;
  for (const double x : s) var += (x - mean) * (x - mean);
  out.mean_ms = mean * 1000.0;
  out.std_ms = std::sqrt(var / static_cast<double>(s.size())) * 1000.0;
  std::vector<double> sorted = s;
  std::sort(sorted.begin(), sorted.end());
  out.median_ms = percentile_of_sorted(sorted, 50) * 1000.0;
  out.p90_ms = percentile_of_sorted(sorted, 90) * 1000.0;
  out.p99_ms = percentile_of_sorted(sorted, 99) * 1000.0;
  return out;
}

ServeBenchMetrics compute_serve_metrics(const LoadGenResult& r, const GoodputSlo& slo) {
  ServeBenchMetrics m;
  m.duration_s = r.duration_s;
  std::vector<double> ttfts, tpots, itls, e2els;
  std::set<std::string> errors;
  int32_t good = 0;
  for (const RequestOutput& o : r.outputs) {
    if (!o.success) {
      ++m.failed;
      if (errors.size() < 10) errors.insert(o.error);
      continue;
    }
    ++m.completed;
    m.total_input_tokens += o.prompt_len;
    m.total_output_tokens += o.output_tokens;
    double tpot = 0.0;  // vLLM counts TPOT as 0 for goodput when there is at most one token
    if (o.output_tokens > 1) {
      tpot = (o.latency_s - o.ttft_s) / static_cast<double>(o.output_tokens - 1);
      tpots.push_back(tpot);
    }
    itls.insert(itls.end(), o.itl_s.begin(), o.itl_s.end());
    ttfts.push_back(o.ttft_s);
    e2els.push_back(o.latency_s);
    if (slo.any()) {
      const bool ok = (slo.ttft_ms <= 0 || o.ttft_s * 1000.0 <= slo.ttft_ms) &&
                      (slo.tpot_ms <= 0 || tpot * 1000.0 <= slo.tpot_ms);
      good += ok ? 1 : 0;
    }
  }
  m.errors.assign(errors.begin(), errors.end());
  if (m.duration_s > 0) {
    m.request_throughput = m.completed / m.duration_s;
    m.request_goodput = good / m.duration_s;
    m.output_throughput = static_cast<double>(m.total_output_tokens) / m.duration_s;
    m.total_token_throughput =
        static_cast<double>(m.total_input_tokens + m.total_output_tokens) / m.duration_s;
  }
  m.ttft = summarize_seconds(ttfts);
  m.tpot = summarize_seconds(tpots);
  m.itl = summarize_seconds(itls);
  m.e2el = summarize_seconds(e2els);
  return m;
}

std::string format_serve_report(const ServeBenchMetrics& m, const GoodputSlo& slo) {
  std::string s;
  auto line = [&](const char* name, const std::string& value) {
    s += strformat("%-40s%10s\n", name, value.c_str());
  };
  auto num = [](double v) { return strformat("%.2f", v); };
  s += "============ Serving Benchmark Result ============\n";
  line("Successful requests:", std::to_string(m.completed));
  line("Failed requests:", std::to_string(m.failed));
  line("Benchmark duration (s):", num(m.duration_s));
  line("Total input tokens:", std::to_string(m.total_input_tokens));
  line("Total generated tokens:", std::to_string(m.total_output_tokens));
  line("Request throughput (req/s):", num(m.request_throughput));
  if (slo.any()) line("Request goodput (req/s):", num(m.request_goodput));
  line("Output token throughput (tok/s):", num(m.output_throughput));
  line("Total Token throughput (tok/s):", num(m.total_token_throughput));
  auto block = [&](const char* title, const char* abbr, const LatencySummary& l) {
    s += strformat("%s\n", title);
    line(strformat("Mean %s (ms):", abbr).c_str(), num(l.mean_ms));
    line(strformat("Median %s (ms):", abbr).c_str(), num(l.median_ms));
    line(strformat("P90 %s (ms):", abbr).c_str(), num(l.p90_ms));
    line(strformat("P99 %s (ms):", abbr).c_str(), num(l.p99_ms));
  };
  block("---------------Time to First Token----------------", "TTFT", m.ttft);
  block("-----Time per Output Token (excl. 1st token)------", "TPOT", m.tpot);
  block("---------------Inter-token Latency----------------", "ITL", m.itl);
  block("----------------End-to-end Latency----------------", "E2EL", m.e2el);
  s += "==================================================\n";
  for (const std::string& e : m.errors) s += "error: " + e + "\n";
  return s;
}

std::string format_sweep_table(const std::vector<int32_t>& levels,
                               const std::vector<ServeBenchMetrics>& rows) {
  std::string s =
      strformat("%11s %6s %6s %8s %10s %10s %10s %10s %10s %10s %10s %10s\n", "concurrency", "ok",
                "fail", "req/s", "out tok/s", "tot tok/s", "TTFT mean", "TTFT p99", "TPOT mean",
                "ITL mean", "ITL p99", "E2E mean");
  s += strformat("%11s %6s %6s %8s %10s %10s %10s %10s %10s %10s %10s %10s\n", "", "", "", "", "",
                 "", "(ms)", "(ms)", "(ms)", "(ms)", "(ms)", "(ms)");
  for (size_t i = 0; i < rows.size() && i < levels.size(); ++i) {
    const ServeBenchMetrics& m = rows[i];
    s += strformat("%11d %6d %6d %8.2f %10.1f %10.1f %10.1f %10.1f %10.2f %10.2f %10.2f %10.1f\n",
                   levels[i], m.completed, m.failed, m.request_throughput, m.output_throughput,
                   m.total_token_throughput, m.ttft.mean_ms, m.ttft.p99_ms, m.tpot.mean_ms,
                   m.itl.mean_ms, m.itl.p99_ms, m.e2el.mean_ms);
  }
  return s;
}

nlohmann::json serve_metrics_json(const ServeBenchMetrics& m) {
  nlohmann::json j = {{"duration", m.duration_s},
                      {"completed", m.completed},
                      {"failed", m.failed},
                      {"total_input_tokens", m.total_input_tokens},
                      {"total_output_tokens", m.total_output_tokens},
                      {"request_throughput", m.request_throughput},
                      {"request_goodput", m.request_goodput},
                      {"output_throughput", m.output_throughput},
                      {"total_token_throughput", m.total_token_throughput}};
  auto add = [&](const char* key, const LatencySummary& l) {
    j[strformat("mean_%s_ms", key)] = l.mean_ms;
    j[strformat("median_%s_ms", key)] = l.median_ms;
    j[strformat("std_%s_ms", key)] = l.std_ms;
    j[strformat("p90_%s_ms", key)] = l.p90_ms;
    j[strformat("p99_%s_ms", key)] = l.p99_ms;
  };
  add("ttft", m.ttft);
  add("tpot", m.tpot);
  add("itl", m.itl);
  add("e2el", m.e2el);
  j["errors_sample"] = m.errors;
  return j;
}

nlohmann::json per_request_json(const LoadGenResult& r) {
  nlohmann::json input_lens = nlohmann::json::array(), output_lens = nlohmann::json::array(),
                 ttfts = nlohmann::json::array(), itls = nlohmann::json::array(),
                 e2els = nlohmann::json::array(), errors = nlohmann::json::array();
  for (const RequestOutput& o : r.outputs) {
    input_lens.push_back(o.prompt_len);
    output_lens.push_back(o.success ? o.output_tokens : 0);
    ttfts.push_back(o.ttft_s);
    itls.push_back(o.itl_s);
    e2els.push_back(o.latency_s);
    errors.push_back(o.error);
  }
  return {{"input_lens", input_lens}, {"output_lens", output_lens},
          {"ttfts", ttfts},           {"itls", itls},
          {"e2els", e2els},           {"errors", errors}};
}

}  // namespace lathe
