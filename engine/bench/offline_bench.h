// Offline benchmarks on an Engine in this process (no HTTP), as vLLM's `bench throughput` and
// `bench latency` measure them:
//   throughput: submit every request at once, wait for all; requests/s, total (prompt + output)
//               tokens/s and output tokens/s over the wall time.
//   latency:    run a batch of batch_size requests to completion, num_iters times after
//               num_iters_warmup unmeasured ones; per-iteration latency with percentiles, plus the
//               requests' TTFT and TPOT (time per output token after the first).
// Requests ignore EOS so every one produces exactly its output length. Each run also reports what
// the engine's metrics saw during it (preemptions, prefix-cache hit rate, slot utilization).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/runtime/engine.h"

namespace lathe {

struct BenchRequest {
  std::vector<TokenId> prompt_tokens;  // or
  std::string prompt;                  // text, tokenized by the engine
  int32_t output_len = 128;
};

// What the engine's metrics counted during a run (differences of two snapshots).
struct EngineRunStats {
  int64_t num_steps = 0;
  int64_t num_preemptions = 0;
  int64_t prefill_tokens_computed = 0;
  int64_t prefix_cache_queries = 0;
  int64_t prefix_cache_hits = 0;
  double prefix_cache_hit_rate = 0.0;
  double slot_utilization = 0.0;  // sequences scheduled per step / max-num-seqs
  double mean_tokens_per_step = 0.0;
};

struct ThroughputResult {
  int32_t num_requests = 0;
  double elapsed_s = 0.0;
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  double requests_per_s = 0.0;
  double total_tokens_per_s = 0.0;
  double output_tokens_per_s = 0.0;
  double mean_ttft_s = 0.0;
  EngineRunStats engine;
};

Result<ThroughputResult> run_throughput_benchmark(Engine& engine,
                                                  const std::vector<BenchRequest>& requests);

struct LatencyOptions {
  int32_t batch_size = 8;
  int32_t input_len = 32;
  int32_t output_len = 128;
  int32_t num_iters_warmup = 2;
  int32_t num_iters = 5;
  uint64_t seed = 0;  // random prompts: fresh ones each iteration, so the prefix cache never helps
  // Constrained decoding: every request of the batch shares this grammar (the server's case of one
  // schema sent by many clients); null = unconstrained.
  std::shared_ptr<TokenConstraint> constraint;
};

struct Percentiles {
  double mean = 0, p10 = 0, p25 = 0, p50 = 0, p75 = 0, p90 = 0, p99 = 0;
};
Percentiles percentiles_of(std::vector<double> values);  // linear interpolation, as numpy
// numpy.percentile(sorted, q) (q in percent, linear interpolation) of values sorted ascending; 0
// for no values.
double percentile_of_sorted(const std::vector<double>& sorted, double q);

struct LatencyResult {
  LatencyOptions options;
  std::vector<double> latencies_s;  // one per measured iteration
  Percentiles latency_s;
  Percentiles ttft_s;  // over every request of every measured iteration
  Percentiles tpot_s;
  double decode_tokens_per_s = 0.0;  // batch_size / mean TPOT
  EngineRunStats engine;
};

Result<LatencyResult> run_latency_benchmark(Engine& engine, const LatencyOptions& options);

// Random token-id prompts of `len` tokens from the model's vocabulary, skipping special tokens
// when the model has a tokenizer.
std::vector<std::vector<TokenId>> random_prompts(const Engine& engine, int32_t count, int32_t len,
                                                 uint64_t seed);

// Machine-readable results (vLLM's key names where they exist).
std::string throughput_json(const ThroughputResult& r);
std::string latency_json(const LatencyResult& r);

}  // namespace lathe
