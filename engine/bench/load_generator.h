// The load generator behind `lathe bench serve`: sends streaming OpenAI requests to any
// OpenAI-compatible server with Poisson (or all-at-once) arrivals under a concurrency cap, and
// records for each request what vLLM's benchmark_serving records: time to first token, every gap
// between streamed chunks, end-to-end latency, tokens in and out.
//
// Timing (vLLM's definitions): the clock starts just before the request is sent (after a
// concurrency slot is free); TTFT is the arrival of the first chunk that carries choices; each
// later such chunk adds one ITL entry (its gap to the previous one); latency is the arrival of the
// last such chunk. Output tokens come from the final usage chunk (stream_options.include_usage),
// or, when a server sends no usage, from the number of non-empty text chunks.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "engine/bench/http_client.h"
#include "engine/bench/serve_bench_dataset.h"

namespace lathe {

struct LoadGenOptions {
  Url base_url;
  std::string endpoint = "/v1/completions";  // or /v1/chat/completions
  std::string model;
  std::string api_key;  // sent as Authorization: Bearer
  double request_rate =
      std::numeric_limits<double>::infinity();  // requests/s (Poisson); inf: all at once
  int32_t max_concurrency = 0;                  // 0: no cap
  bool ignore_eos = false;                      // sends vLLM's "ignore_eos": true
  uint64_t seed = 0;                            // arrival times
  int32_t timeout_s = 600;                      // per request, and between two chunks
};

struct RequestOutput {
  bool success = false;
  std::string error;
  int32_t prompt_len = 0;  // the server's usage.prompt_tokens, else the dataset's length
  int32_t output_tokens = 0;
  double ttft_s = 0.0;
  double latency_s = 0.0;     // request sent -> last chunk with choices
  std::vector<double> itl_s;  // gaps between consecutive chunks with choices
  std::string generated_text;
  double start_s = 0.0;  // when it was sent, from the run's start
};

struct LoadGenResult {
  std::vector<RequestOutput> outputs;  // in dataset order
  double duration_s = 0.0;             // first dispatch -> last request done
};

// Progress: (finished requests, failed so far, total). Called from worker threads (serialized).
using LoadGenProgress = std::function<void(int32_t done, int32_t failed, int32_t total)>;

// The JSON body of one request (streaming, greedy, with usage), as vLLM's benchmark sends it.
std::string make_request_body(const LoadGenOptions& options, const BenchPrompt& prompt);

// Sends one request and measures it. With `connection`, reuses *connection when it is open
// (retrying once on a fresh one if the server had closed it) and leaves a reusable one there.
RequestOutput send_bench_request(const LoadGenOptions& options, const BenchPrompt& prompt,
                                 std::unique_ptr<HttpConnection>* connection = nullptr);

// Runs every prompt; blocks until all are done. Errors only for unusable options.
Result<LoadGenResult> run_load(const LoadGenOptions& options,
                               const std::vector<BenchPrompt>& prompts,
                               const LoadGenProgress& progress = nullptr);

}  // namespace lathe
