// MetricsRegistry::prometheus_text(): the Prometheus text exposition format, version 0.0.4.
// https://prometheus.io/docs/instrumenting/exposition_formats/
#include <charconv>
#include <cmath>

#include "engine/runtime/metrics.h"

namespace lathe {

namespace {

// Shortest round-trip decimal; Prometheus spellings for the special values.
std::string format_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  if (ec != std::errc()) return "NaN";
  return std::string(buf, end);
}

std::string escape_help(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

class Writer {
 public:
  explicit Writer(const std::string& model_name)
      : model_label_("model_name=\"" + prometheus_escape_label(model_name) + "\"") {}

  void family(const std::string& name, const char* type, const std::string& help) {
    out_ += "# HELP " + name + " " + escape_help(help) + "\n";
    out_ += "# TYPE " + name + " " + type + "\n";
  }
  // extra_labels: already formatted `key="value"` pairs, comma-separated, or empty.
  void sample(const std::string& name, const std::string& extra_labels, double value) {
    out_ += name + "{" + (extra_labels.empty() ? "" : extra_labels + ",") + model_label_ + "} " +
            format_value(value) + "\n";
  }
  void gauge(const std::string& name, const std::string& help, double value) {
    family(name, "gauge", help);
    sample(name, "", value);
  }
  void counter(const std::string& name, const std::string& help, double value) {
    family(name, "counter", help);
    sample(name, "", value);
  }
  void histogram(const std::string& name, const std::string& help, const HistogramData& h) {
    family(name, "histogram", help);
    uint64_t cumulative = 0;
    for (size_t i = 0; i < h.bounds.size(); ++i) {
      cumulative += h.counts[i];
      sample(name + "_bucket", "le=\"" + format_value(h.bounds[i]) + "\"",
             static_cast<double>(cumulative));
    }
    sample(name + "_bucket", "le=\"+Inf\"", static_cast<double>(h.count));
    sample(name + "_count", "", static_cast<double>(h.count));
    sample(name + "_sum", "", h.sum);
  }
  std::string take() { return std::move(out_); }

 private:
  std::string model_label_;
  std::string out_;
};

}  // namespace

std::string prometheus_escape_label(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string MetricsRegistry::prometheus_text() const {
  const MetricsSnapshot s = snapshot(~uint64_t{0}, ~uint64_t{0});  // no series needed
  Writer w(options_.model_name);
  const auto d = [](int64_t v) { return static_cast<double>(v); };

  w.gauge("lathe:num_requests_running", "Number of requests in model execution batches.",
          s.num_requests_running);
  w.gauge("lathe:num_requests_waiting", "Number of requests waiting to be processed.",
          s.num_requests_waiting);
  w.gauge("lathe:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
          s.kv_cache_usage);
  w.family("lathe:kv_cache_blocks", "gauge",
           "KV-cache blocks by state: used (held by requests), cached (free, holding prefix-cache "
           "content), free.");
  w.sample("lathe:kv_cache_blocks", "state=\"used\"", s.kv_blocks_used);
  w.sample("lathe:kv_cache_blocks", "state=\"cached\"", s.kv_blocks_cached);
  w.sample("lathe:kv_cache_blocks", "state=\"free\"", s.kv_blocks_free);
  w.gauge("lathe:batch_slots_in_use", "Sequences running (batch slots in use).",
          s.num_requests_running);
  w.gauge("lathe:batch_slots_max", "Batch slots (max-num-seqs).", s.max_num_seqs);
  w.gauge("lathe:batch_slot_utilization",
          "Share of batch slots busy per step since start: sequences scheduled / max-num-seqs.",
          s.slot_utilization);
  w.family("lathe:prompt_throughput_tokens_per_second", "gauge",
           "Prefill tokens computed per second over a sliding window.");
  w.sample("lathe:prompt_throughput_tokens_per_second", "window=\"1s\"", s.prompt_tokens_per_s_1s);
  w.sample("lathe:prompt_throughput_tokens_per_second", "window=\"10s\"",
           s.prompt_tokens_per_s_10s);
  w.family("lathe:generation_throughput_tokens_per_second", "gauge",
           "Generated tokens per second over a sliding window.");
  w.sample("lathe:generation_throughput_tokens_per_second", "window=\"1s\"",
           s.generation_tokens_per_s_1s);
  w.sample("lathe:generation_throughput_tokens_per_second", "window=\"10s\"",
           s.generation_tokens_per_s_10s);

  w.counter("lathe:prompt_tokens_total", "Number of prefill tokens processed.", d(s.prompt_tokens));
  w.counter("lathe:generation_tokens_total", "Number of generation tokens processed.",
            d(s.generation_tokens));
  w.counter("lathe:prefill_tokens_computed_total",
            "Prompt and recomputed tokens run through the model (prefix-cache hits excluded).",
            d(s.prefill_tokens_computed));
  w.counter("lathe:prefix_cache_queries_total",
            "Prefix-cache queries, in terms of number of queried tokens.",
            d(s.prefix_cache_queries));
  w.counter("lathe:prefix_cache_hits_total",
            "Prefix-cache hits, in terms of number of cached tokens.", d(s.prefix_cache_hits));
  w.counter("lathe:num_preemptions_total", "Cumulative number of preemptions from the engine.",
            d(s.num_preemptions));
  w.family("lathe:request_success_total", "counter",
           "Count of finished requests by finish reason.");
  w.sample("lathe:request_success_total", "finished_reason=\"stop\"", d(s.requests_finished_stop));
  w.sample("lathe:request_success_total", "finished_reason=\"length\"",
           d(s.requests_finished_length));
  w.sample("lathe:request_success_total", "finished_reason=\"abort\"",
           d(s.requests_finished_abort));
  w.sample("lathe:request_success_total", "finished_reason=\"error\"",
           d(s.requests_finished_error));
  w.counter("lathe:num_steps_total", "Engine steps (model forward passes) run.", d(s.num_steps));
  w.counter("lathe:spec_decode_num_drafts_total",
            "Speculative decoding: sequence-steps that carried draft tokens.",
            d(s.spec_decode_num_drafts));
  w.counter("lathe:spec_decode_num_draft_tokens_total",
            "Speculative decoding: draft tokens verified.", d(s.spec_decode_num_draft_tokens));
  w.counter("lathe:spec_decode_num_accepted_tokens_total",
            "Speculative decoding: draft tokens accepted.", d(s.spec_decode_num_accepted_tokens));

  w.histogram("lathe:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
              s.ttft_s);
  w.histogram("lathe:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
              s.itl_s);
  w.histogram("lathe:request_time_per_output_token_seconds",
              "Histogram of time per output token in seconds.", s.tpot_s);
  w.histogram("lathe:e2e_request_latency_seconds",
              "Histogram of end to end request latency in seconds.", s.e2e_s);
  w.histogram("lathe:request_queue_time_seconds",
              "Histogram of time spent in WAITING phase for request.", s.queue_s);
  w.histogram("lathe:request_prompt_tokens", "Number of prefill tokens processed.", s.prompt_len);
  w.histogram("lathe:request_generation_tokens", "Number of generation tokens processed.",
              s.generation_len);
  w.histogram("lathe:iteration_tokens_total", "Histogram of number of tokens per engine_step.",
              s.tokens_per_step);
  return w.take();
}

}  // namespace lathe
