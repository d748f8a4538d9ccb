// The engine's metrics: one registry, written by the engine core's thread once per step, read from
// any thread in two views:
//   snapshot()        a consistent copy of everything (one lock, no allocation beyond the copy),
//                     cheap enough for a GUI to poll 10 times a second;
//   prometheus_text() the Prometheus text exposition (format 0.0.4) with vLLM's metric names under
//                     a `lathe:` prefix, so existing vLLM dashboards adapt with a rename.
//
// Prometheus names (counters carry _total, as prometheus_client writes vLLM's):
//   gauges      lathe:num_requests_running, lathe:num_requests_waiting, lathe:kv_cache_usage_perc
//               (fraction in [0, 1], as vLLM's), lathe:kv_cache_blocks{state="used|cached|free"},
//               lathe:batch_slots_in_use, lathe:batch_slots_max, lathe:batch_slot_utilization,
//               lathe:prompt_throughput_tokens_per_second{window="1s|10s"},
//               lathe:generation_throughput_tokens_per_second{window="1s|10s"}
//   counters    lathe:prompt_tokens_total, lathe:generation_tokens_total,
//               lathe:prefill_tokens_computed_total, lathe:prefix_cache_queries_total,
//               lathe:prefix_cache_hits_total, lathe:num_preemptions_total,
//               lathe:request_success_total{finished_reason="stop|length|abort|error"},
//               lathe:num_steps_total, lathe:spec_decode_num_drafts_total,
//               lathe:spec_decode_num_draft_tokens_total,
//               lathe:spec_decode_num_accepted_tokens_total
//   histograms  lathe:time_to_first_token_seconds, lathe:inter_token_latency_seconds,
//               lathe:request_time_per_output_token_seconds, lathe:e2e_request_latency_seconds,
//               lathe:request_queue_time_seconds, lathe:request_prompt_tokens,
//               lathe:request_generation_tokens, lathe:iteration_tokens_total
// Every sample carries model_name="<served model name>".
#pragma once

#include <climits>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/runtime/histogram.h"
#include "engine/runtime/request.h"

namespace lathe {

// Time to first token of one request, for per-request plots.
struct TtftPoint {
  uint64_t seq = 0;  // 1, 2, ...: position in the registry's TTFT series
  RequestId id = 0;
  double time_s = 0.0;  // when the first token came, seconds since the registry started
  double ttft_s = 0.0;  // first token - arrival
};

// One finished request, for request logs.
struct FinishedRequestPoint {
  uint64_t seq = 0;  // 1, 2, ...: position in the registry's finished series
  RequestId id = 0;
  std::string client_id;
  double time_s = 0.0;  // when it finished, seconds since the registry started
  FinishReason reason = FinishReason::kNone;
  int32_t prompt_tokens = 0;
  int32_t generation_tokens = 0;
  int32_t cached_prompt_tokens = 0;
  double queue_s = 0.0;              // arrival -> first scheduled (0 if never scheduled)
  double ttft_s = -1.0;              // -1 when no token was produced
  double e2e_s = 0.0;                // arrival -> finish
  double decode_tokens_per_s = 0.0;  // (generation_tokens - 1) / (finish - first token); 0 if < 2
};

struct MetricsSnapshot {
  double time_s = 0.0;  // seconds since the registry started

  // Gauges, all from the same moment.
  int32_t num_requests_running = 0;
  int32_t num_requests_waiting = 0;
  int32_t max_num_seqs = 0;      // batch slots
  int32_t kv_blocks_total = 0;   // == used + cached + free
  int32_t kv_blocks_used = 0;    // held by requests
  int32_t kv_blocks_cached = 0;  // free but holding prefix-cache content (evicted LRU first)
  int32_t kv_blocks_free = 0;
  int32_t kv_block_size = 0;    // tokens per block
  double kv_cache_usage = 0.0;  // used / total in [0, 1]

  // Counters since start.
  int64_t num_steps = 0;
  int64_t prompt_tokens = 0;  // prompt tokens of requests that produced a first token
  int64_t generation_tokens = 0;
  int64_t prefill_tokens_computed = 0;  // prompt (and recomputed) tokens run through the model
  int64_t prefix_cache_queries = 0;     // tokens looked up at admission
  int64_t prefix_cache_hits = 0;        // of which were found in the cache
  int64_t num_preemptions = 0;
  int64_t requests_finished_stop = 0;
  int64_t requests_finished_length = 0;
  int64_t requests_finished_abort = 0;
  int64_t requests_finished_error = 0;
  int64_t slot_steps_busy = 0;   // sum over steps of sequences scheduled
  int64_t slot_steps_total = 0;  // sum over steps of max_num_seqs
  // Speculative decoding: sequence-steps that carried drafts, drafts verified, drafts accepted.
  int64_t spec_decode_num_drafts = 0;
  int64_t spec_decode_num_draft_tokens = 0;
  int64_t spec_decode_num_accepted_tokens = 0;

  // Derived.
  double prefix_cache_hit_rate = 0.0;  // hits / queries since start, [0, 1]
  double slot_utilization = 0.0;       // slot_steps_busy / slot_steps_total since start, [0, 1]
  double slot_utilization_10s = 0.0;   // the same over the steps of the last 10 s
  double spec_decode_acceptance_rate = 0.0;  // accepted / draft tokens since start, [0, 1]
  // Sliding-window throughput, tokens per second over the last 1 s and 10 s. "Prompt" counts
  // prefill tokens computed (prefix-cache hits excluded).
  double prompt_tokens_per_s_1s = 0.0;
  double prompt_tokens_per_s_10s = 0.0;
  double generation_tokens_per_s_1s = 0.0;
  double generation_tokens_per_s_10s = 0.0;

  HistogramData ttft_s, itl_s, tpot_s, e2e_s, queue_s;
  HistogramData prompt_len, generation_len, tokens_per_step;

  // Series since the cursors passed to snapshot() (oldest first, at most the last 4096 of each);
  // pass the returned cursors to the next call to get only new points.
  std::vector<TtftPoint> ttft_points;
  uint64_t ttft_cursor = 0;
  std::vector<FinishedRequestPoint> finished;
  uint64_t finished_cursor = 0;
};

// Gauge values at one moment, from the engine core.
struct EngineLoad {
  int32_t num_running = 0;
  int32_t num_waiting = 0;
  int32_t kv_blocks_used = 0;
  int32_t kv_blocks_cached = 0;
  int32_t kv_blocks_free = 0;
};

// A request's first token, produced at MetricsUpdate::time.
struct FirstTokenRecord {
  RequestId id = 0;
  double ttft_s = 0.0;
  double queue_s = 0.0;
  int32_t prompt_tokens = 0;
};

// Everything one engine step (or one batch of aborts) changed. Fields left at zero change nothing.
struct MetricsUpdate {
  Clock::time_point time;  // when it happened
  bool is_step = false;    // a model step ran: counts a step and its slot use
  int32_t num_scheduled_seqs = 0;
  int32_t num_batched_tokens = 0;
  int32_t num_prefill_tokens = 0;  // prompt / recomputed tokens computed this step
  int32_t num_generated_tokens = 0;
  int32_t num_preemptions = 0;
  int32_t num_spec_drafts = 0;      // sequences that carried drafts this step
  int32_t num_draft_tokens = 0;     // drafts verified this step
  int32_t num_accepted_tokens = 0;  // of which the model accepted
  int64_t prefix_cache_queries = 0;
  int64_t prefix_cache_hits = 0;
  std::vector<double> itl_s;  // inter-token gaps of tokens produced (first tokens excluded)
  std::vector<FirstTokenRecord> first_tokens;
  std::vector<FinishedRequestPoint>
      finished;                    // at `time`; seq and time_s are filled by the registry
  std::optional<EngineLoad> load;  // gauges after the update (unset: unchanged)
};

struct MetricsOptions {
  std::string model_name;
  int32_t max_num_seqs = 1;
  int32_t max_num_batched_tokens = 512;
  int32_t max_model_len = 2048;
  int32_t kv_blocks_total = 0;
  int32_t kv_block_size = 16;
};

class MetricsRegistry {
 public:
  explicit MetricsRegistry(const MetricsOptions& options);

  // Writer: the engine core's thread.
  void record(const MetricsUpdate& update);

  // Readers: any thread.
  MetricsSnapshot snapshot(uint64_t ttft_cursor = 0, uint64_t finished_cursor = 0) const;
  std::string prometheus_text() const;
  const MetricsOptions& options() const { return options_; }

  // Clears counters, histograms and series (gauges stay). For benchmarks that measure phases.
  void reset();

 private:
  // Sliding windows: a ring of 100 ms buckets covering the last 10 s (constant memory and cost,
  // whatever the step rate).
  struct WindowBucket {
    int64_t id = INT64_MIN;  // (time - start) / 100 ms
    int64_t prefill_tokens = 0;
    int64_t generated_tokens = 0;
    int64_t busy_slots = 0;
    int64_t steps = 0;
  };
  static constexpr int kNumBuckets = 101;
  int64_t bucket_id(Clock::time_point t) const;
  MetricsSnapshot snapshot_locked(Clock::time_point now, uint64_t ttft_cursor,
                                  uint64_t finished_cursor) const;

  const MetricsOptions options_;
  const Clock::time_point start_;
  mutable std::mutex mutex_;
  MetricsSnapshot state_;  // gauges and counters (series and windows are kept below)
  Histogram ttft_, itl_, tpot_, e2e_, queue_, prompt_len_, generation_len_, tokens_per_step_;
  std::vector<WindowBucket> window_;  // kNumBuckets, indexed by id mod kNumBuckets
  std::deque<TtftPoint> ttft_points_;
  std::deque<FinishedRequestPoint> finished_points_;
  uint64_t next_ttft_seq_ = 1;
  uint64_t next_finished_seq_ = 1;
};

// Escapes a Prometheus label value (backslash, double quote, newline).
std::string prometheus_escape_label(const std::string& value);

}  // namespace lathe
