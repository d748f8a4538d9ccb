#include "engine/bench/offline_bench.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <random>

#include "engine/core/strings.h"
#include "engine/runtime/metrics.h"

namespace lathe {

namespace {

EngineRunStats diff(const MetricsSnapshot& a, const MetricsSnapshot& b) {
  EngineRunStats s;
  s.num_steps = b.num_steps - a.num_steps;
  s.num_preemptions = b.num_preemptions - a.num_preemptions;
  s.prefill_tokens_computed = b.prefill_tokens_computed - a.prefill_tokens_computed;
  s.prefix_cache_queries = b.prefix_cache_queries - a.prefix_cache_queries;
  s.prefix_cache_hits = b.prefix_cache_hits - a.prefix_cache_hits;
  s.prefix_cache_hit_rate = s.prefix_cache_queries > 0
                                ? static_cast<double>(s.prefix_cache_hits) / s.prefix_cache_queries
                                : 0.0;
  const int64_t busy = b.slot_steps_busy - a.slot_steps_busy;
  const int64_t total = b.slot_steps_total - a.slot_steps_total;
  s.slot_utilization = total > 0 ? static_cast<double>(busy) / static_cast<double>(total) : 0.0;
  const double tokens = b.tokens_per_step.sum - a.tokens_per_step.sum;
  s.mean_tokens_per_step = s.num_steps > 0 ? tokens / static_cast<double>(s.num_steps) : 0.0;
  return s;
}

struct Finished {
  int32_t prompt_tokens = 0;
  int32_t output_tokens = 0;
  FinishReason reason = FinishReason::kNone;
  std::string error;
  RequestTimeline timeline;
};

// Submits every request at once (one submit_batch, so the engine sees them arrive together) and
// waits for all; results in request order. `constraint` (may be null) goes to every request.
Result<std::vector<Finished>> run_batch(Engine& engine, const std::vector<BenchRequest>& requests,
                                        const std::shared_ptr<TokenConstraint>& constraint = {}) {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Finished> done(requests.size());
  size_t remaining = requests.size();
  std::vector<RequestSpec> specs(requests.size());
  std::vector<StreamCallback> callbacks;
  for (size_t i = 0; i < requests.size(); ++i) {
    RequestSpec& spec = specs[i];
    spec.prompt_tokens = requests[i].prompt_tokens;
    if (requests[i].prompt_tokens.empty()) spec.prompt = requests[i].prompt;
    spec.sampling.temperature = 0.0f;
    spec.sampling.ignore_eos = true;
    spec.sampling.max_tokens = requests[i].output_len;
    spec.sampling.constraint = constraint;
    callbacks.push_back([&, i](const StreamEvent& e) {
      if (!e.finished) return;
      std::lock_guard<std::mutex> lock(mu);
      done[i] = {e.usage.prompt_tokens, e.usage.completion_tokens, e.finish_reason, e.error,
                 e.timeline ? *e.timeline : RequestTimeline{}};
      if (--remaining == 0) cv.notify_all();
    });
  }
  LATHE_RETURN_IF_ERROR(engine.submit_batch(specs, std::move(callbacks)).status());
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return remaining == 0; });
  for (size_t i = 0; i < done.size(); ++i)
    if (done[i].reason == FinishReason::kError)
      return internal_error(strformat("request %zu failed: ", i) + done[i].error);
  return done;
}

nlohmann::json stats_json(const EngineRunStats& s) {
  return {{"num_steps", s.num_steps},
          {"num_preemptions", s.num_preemptions},
          {"prefill_tokens_computed", s.prefill_tokens_computed},
          {"prefix_cache_queries", s.prefix_cache_queries},
          {"prefix_cache_hits", s.prefix_cache_hits},
          {"prefix_cache_hit_rate", s.prefix_cache_hit_rate},
          {"slot_utilization", s.slot_utilization},
          {"mean_tokens_per_step", s.mean_tokens_per_step}};
}

nlohmann::json percentiles_json(const Percentiles& p) {
  return {{"mean", p.mean}, {"p10", p.p10}, {"p25", p.p25}, {"p50", p.p50},
          {"p75", p.p75},   {"p90", p.p90}, {"p99", p.p99}};
}

}  // namespace

double percentile_of_sorted(const std::vector<double>& v, double q) {
  if (v.empty()) return 0.0;
  const double rank = q / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (rank - static_cast<double>(lo));
}

Percentiles percentiles_of(std::vector<double> v) {
  Percentiles p;
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  p.mean = sum / static_cast<double>(v.size());
  p.p10 = percentile_of_sorted(v, 10);
  p.p25 = percentile_of_sorted(v, 25);
  p.p50 = percentile_of_sorted(v, 50);
  p.p75 = percentile_of_sorted(v, 75);
  p.p90 = percentile_of_sorted(v, 90);
  p.p99 = percentile_of_sorted(v, 99);
  return p;
}

std::vector<std::vector<TokenId>> random_prompts(const Engine& engine, int32_t count, int32_t len,
                                                 uint64_t seed) {
  const Tokenizer* tok = engine.model().tokenizer.get();
  const int64_t vocab = engine.model().config.vocab_size;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> pick(0, vocab - 1);
  std::vector<std::vector<TokenId>> out(static_cast<size_t>(count));
  for (auto& p : out) {
    while (static_cast<int32_t>(p.size()) < len) {
      const TokenId t = static_cast<TokenId>(pick(rng));
      if (tok != nullptr && tok->is_special(t)) continue;
      p.push_back(t);
    }
  }
  return out;
}

Result<ThroughputResult> run_throughput_benchmark(Engine& engine,
                                                  const std::vector<BenchRequest>& requests) {
  if (requests.empty()) return invalid_argument("no requests to run: --num-prompts must be >= 1");
  const MetricsSnapshot before = engine.metrics().snapshot(~uint64_t{0}, ~uint64_t{0});
  const Clock::time_point start = Clock::now();
  LATHE_ASSIGN_OR_RETURN(std::vector<Finished> done, run_batch(engine, requests));
  const double elapsed = seconds(Clock::now() - start);
  const MetricsSnapshot after = engine.metrics().snapshot(~uint64_t{0}, ~uint64_t{0});
  ThroughputResult r;
  r.num_requests = static_cast<int32_t>(requests.size());
  r.elapsed_s = elapsed;
  double ttft_sum = 0;
  for (const Finished& f : done) {
    r.prompt_tokens += f.prompt_tokens;
    r.output_tokens += f.output_tokens;
    ttft_sum += seconds(f.timeline.first_token - f.timeline.arrival);
  }
  r.requests_per_s = r.num_requests / elapsed;
  r.total_tokens_per_s = static_cast<double>(r.prompt_tokens + r.output_tokens) / elapsed;
  r.output_tokens_per_s = static_cast<double>(r.output_tokens) / elapsed;
  r.mean_ttft_s = ttft_sum / static_cast<double>(done.size());
  r.engine = diff(before, after);
  return r;
}

Result<LatencyResult> run_latency_benchmark(Engine& engine, const LatencyOptions& o) {
  if (o.batch_size < 1 || o.input_len < 1 || o.output_len < 1 || o.num_iters < 1 ||
      o.num_iters_warmup < 0)
    return invalid_argument("--batch-size, --input-len, --output-len and --num-iters must be >= 1");
  LatencyResult r;
  r.options = o;
  std::vector<double> ttfts, tpots;
  MetricsSnapshot before;
  for (int32_t it = 0; it < o.num_iters_warmup + o.num_iters; ++it) {
    const bool measured = it >= o.num_iters_warmup;
    if (it == o.num_iters_warmup) before = engine.metrics().snapshot(~uint64_t{0}, ~uint64_t{0});
    std::vector<BenchRequest> batch;
    for (auto& p : random_prompts(engine, o.batch_size, o.input_len, o.seed * 1000003 + it))
      batch.push_back({std::move(p), {}, o.output_len});
    const Clock::time_point start = Clock::now();
    LATHE_ASSIGN_OR_RETURN(std::vector<Finished> done, run_batch(engine, batch, o.constraint));
    const double latency = seconds(Clock::now() - start);
    if (!measured) continue;
    r.latencies_s.push_back(latency);
    for (const Finished& f : done) {
      const RequestTimeline& t = f.timeline;
      const double ttft = seconds(t.first_token - t.arrival);
      ttfts.push_back(ttft);
      if (f.output_tokens > 1)
        tpots.push_back(seconds(t.finished - t.first_token) / (f.output_tokens - 1));
    }
  }
  r.engine = diff(before, engine.metrics().snapshot(~uint64_t{0}, ~uint64_t{0}));
  r.latency_s = percentiles_of(r.latencies_s);
  r.ttft_s = percentiles_of(ttfts);
  r.tpot_s = percentiles_of(tpots);
  r.decode_tokens_per_s = r.tpot_s.mean > 0 ? o.batch_size / r.tpot_s.mean : 0.0;
  return r;
}

std::string throughput_json(const ThroughputResult& r) {
  nlohmann::json j = {{"elapsed_time", r.elapsed_s},
                      {"num_requests", r.num_requests},
                      {"total_num_tokens", r.prompt_tokens + r.output_tokens},
                      {"total_input_tokens", r.prompt_tokens},
                      {"total_output_tokens", r.output_tokens},
                      {"requests_per_second", r.requests_per_s},
                      {"tokens_per_second", r.total_tokens_per_s},
                      {"output_tokens_per_second", r.output_tokens_per_s},
                      {"mean_ttft_s", r.mean_ttft_s},
                      {"engine", stats_json(r.engine)}};
  return j.dump(2);
}

std::string latency_json(const LatencyResult& r) {
  const Percentiles& l = r.latency_s;
  nlohmann::json j = {
      {"batch_size", r.options.batch_size},
      {"input_len", r.options.input_len},
      {"output_len", r.options.output_len},
      {"num_iters", r.options.num_iters},
      {"avg_latency", l.mean},
      {"latencies", r.latencies_s},
      {"percentiles",
       {{"10", l.p10}, {"25", l.p25}, {"50", l.p50}, {"75", l.p75}, {"90", l.p90}, {"99", l.p99}}},
      {"ttft_s", percentiles_json(r.ttft_s)},
      {"tpot_s", percentiles_json(r.tpot_s)},
      {"decode_tokens_per_second", r.decode_tokens_per_s},
      {"engine", stats_json(r.engine)}};
  return j.dump(2);
}

}  // namespace lathe
