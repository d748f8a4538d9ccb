// `lathe bench`: offline benchmarks on an engine in this process, with vLLM's flag names.
//   lathe bench throughput -m MODEL --num-prompts N --input-len I --output-len O [--dataset ...]
//   lathe bench latency -m MODEL --batch-size B --input-len I --output-len O [--num-iters K]
//                       [--guided-json SCHEMA | --guided-regex R]  (constrained-decoding overhead)
// `lathe bench serve` (the HTTP load generator, app/cmd_bench_serve.cpp) registers itself as a
// third subcommand through register_bench_serve().
#include <CLI/CLI.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "app/commands.h"
#include "app/engine_flags.h"
#include "engine/bench/offline_bench.h"
#include "engine/bench/serve_bench_dataset.h"
#include "engine/core/atomic_file.h"
#include "engine/core/log.h"
#include "engine/core/strings.h"
#include "engine/grammar/grammar_constraint.h"
#include "engine/grammar/json_schema_regex.h"
#include "engine/runtime/engine.h"

namespace lathe::cli {
namespace {

struct ThroughputFlags {
  int num_prompts = 1000;
  int input_len = 1024;
  int output_len = 128;
  std::string dataset = "random";
  int prefix_len = 0;
  double range_ratio = 0.0;
  uint64_t seed = 0;
  std::string json;
};

struct LatencyFlags {
  LatencyOptions options;
  std::string json;
  std::string guided_json;   // a JSON schema file: constrain every request, compare with none
  std::string guided_regex;  // or a regex (byte_regex.h's dialect)
};

// min_waiting: the requests one run submits at once must fit in the waiting queue.
Result<std::unique_ptr<Engine>> make_engine(const EngineFlags& ef, int min_waiting) {
  LATHE_ASSIGN_OR_RETURN(EngineConfig config, resolve_engine_flags(ef));
  config.scheduler.max_waiting_requests =
      std::max(config.scheduler.max_waiting_requests, min_waiting);
  return Engine::create(config);
}

bool write_json(const std::string& path, const std::string& text) {
  if (path.empty()) return true;
  // Atomic: an interrupted run leaves the previous results, never half a file.
  if (Status st = write_file_atomically(path, text + "\n"); !st.is_ok()) {
    log_error("cannot write --json: " + st.message());
    return false;
  }
  log_info("results written to " + path);
  return true;
}

void print_engine_stats(const EngineRunStats& s) {
  std::printf(
      "Engine: %lld steps, %.1f tokens/step, slot utilization %.1f%%, %lld preemptions, "
      "prefix-cache hit rate %.1f%% (%lld of %lld prompt tokens), %lld prefill tokens computed\n",
      static_cast<long long>(s.num_steps), s.mean_tokens_per_step, 100.0 * s.slot_utilization,
      static_cast<long long>(s.num_preemptions), 100.0 * s.prefix_cache_hit_rate,
      static_cast<long long>(s.prefix_cache_hits), static_cast<long long>(s.prefix_cache_queries),
      static_cast<long long>(s.prefill_tokens_computed));
}

Status check_lengths(const Engine& engine, int input_len, int output_len) {
  const int max_len = engine.config().scheduler.max_model_len;
  if (static_cast<int64_t>(input_len) + output_len > max_len)
    return invalid_argument(
        strformat("--input-len %d + --output-len %d = %d tokens exceeds max-model-len %d; raise "
                  "--max-model-len "
                  "or shorten the requests",
                  input_len, output_len, input_len + output_len, max_len));
  return Status::ok();
}

int run_throughput(const EngineFlags& ef, const ThroughputFlags& f) {
  auto engine_r = make_engine(ef, f.num_prompts);
  if (!engine_r.is_ok()) {
    log_error(engine_r.status().message());
    return 1;
  }
  Engine& engine = *engine_r.value();
  DatasetOptions d;
  d.dataset = f.dataset;
  d.num_prompts = f.num_prompts;
  d.input_len = f.input_len;
  d.output_len = f.output_len;
  d.range_ratio = f.range_ratio;
  d.prefix_len = f.prefix_len;
  d.seed = f.seed;
  d.token_ids = true;
  d.vocab_size = engine.model().config.vocab_size;
  if (f.dataset == "random" || f.dataset == "prefix") {
    const int prefix = f.dataset == "prefix" && f.prefix_len == 0 ? 512 : f.prefix_len;
    const Status s =
        check_lengths(engine, prefix + static_cast<int>(f.input_len * (1 + f.range_ratio)),
                      static_cast<int>(f.output_len * (1 + f.range_ratio)));
    if (!s.is_ok()) {
      log_error(s.message());
      return 1;
    }
  }
  auto prompts = make_bench_dataset(d);
  if (!prompts.is_ok()) {
    log_error(prompts.status().message());
    return 1;
  }
  std::vector<BenchRequest> requests;
  for (BenchPrompt& p : prompts.value())
    requests.push_back(
        {std::vector<TokenId>(p.token_ids.begin(), p.token_ids.end()), p.text, p.output_len});
  log_info(strformat("running %zu requests", requests.size()));
  auto r = run_throughput_benchmark(engine, requests);
  if (!r.is_ok()) {
    log_error(r.status().message());
    return 1;
  }
  const ThroughputResult& t = r.value();
  std::printf("Throughput: %.2f requests/s, %.2f total tokens/s, %.2f output tokens/s\n",
              t.requests_per_s, t.total_tokens_per_s, t.output_tokens_per_s);
  std::printf(
      "Total num prompt tokens: %lld\nTotal num output tokens: %lld\nElapsed: %.2f s, mean TTFT "
      "%.1f ms\n",
      static_cast<long long>(t.prompt_tokens), static_cast<long long>(t.output_tokens), t.elapsed_s,
      1000.0 * t.mean_ttft_s);
  print_engine_stats(t.engine);
  std::fflush(stdout);
  return write_json(f.json, throughput_json(t)) ? 0 : 1;
}

// The grammar of --guided-json / --guided-regex over the model's vocabulary; null without either.
Result<std::shared_ptr<TokenConstraint>> bench_constraint(const Engine& engine,
                                                          const LatencyFlags& f) {
  if (f.guided_json.empty() && f.guided_regex.empty()) return std::shared_ptr<TokenConstraint>();
  if (!f.guided_json.empty() && !f.guided_regex.empty())
    return invalid_argument("give --guided-json or --guided-regex, not both");
  std::string regex = f.guided_regex;
  if (!f.guided_json.empty()) {
    std::ifstream in(f.guided_json, std::ios::binary);
    if (!in) return not_found("--guided-json: cannot open '" + f.guided_json + "'");
    std::stringstream text;
    text << in.rdbuf();
    const nlohmann::ordered_json schema =
        nlohmann::ordered_json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
    if (schema.is_discarded())
      return invalid_argument("--guided-json: '" + f.guided_json +
                              "' is not JSON; give a JSON schema file");
    auto r = json_schema_to_regex(schema);
    if (!r.is_ok()) return invalid_argument("--guided-json: " + r.status().message());
    regex = std::move(r).value();
  }
  const Tokenizer* tok = engine.model().tokenizer.get();
  if (tok == nullptr)
    return invalid_argument(
        "constrained decoding needs the model's tokenizer: this model has none (with --load-format "
        "dummy, put the model's tokenizer.json beside its config.json)");
  auto vocab = std::make_shared<const TokenVocabulary>(*tok);
  auto g = GrammarConstraint::create(regex, std::move(vocab));
  if (!g.is_ok())
    return invalid_argument((f.guided_json.empty() ? "--guided-regex: " : "--guided-json: ") +
                            g.status().message());
  return std::shared_ptr<TokenConstraint>(std::move(g).value());
}

void print_latency(const LatencyResult& l) {
  const Percentiles& p = l.latency_s;
  std::printf("Avg latency: %.4f seconds\n", p.mean);
  const std::pair<int, double> pcts[] = {{10, p.p10}, {25, p.p25}, {50, p.p50},
                                         {75, p.p75}, {90, p.p90}, {99, p.p99}};
  for (const auto& [pct, v] : pcts) std::printf("%d%% percentile latency: %.4f seconds\n", pct, v);
  std::printf("TTFT: mean %.1f ms, p50 %.1f ms, p90 %.1f ms, p99 %.1f ms\n", 1000 * l.ttft_s.mean,
              1000 * l.ttft_s.p50, 1000 * l.ttft_s.p90, 1000 * l.ttft_s.p99);
  std::printf(
      "TPOT: mean %.2f ms, p50 %.2f ms, p90 %.2f ms, p99 %.2f ms (decode %.1f tokens/s at batch "
      "%d)\n",
      1000 * l.tpot_s.mean, 1000 * l.tpot_s.p50, 1000 * l.tpot_s.p90, 1000 * l.tpot_s.p99,
      l.decode_tokens_per_s, l.options.batch_size);
  print_engine_stats(l.engine);
}

// With a grammar the batch runs twice in this process, unconstrained and then constrained (same
// prompts, same engine), and the overhead is the difference of the mean TPOTs.
int run_latency(const EngineFlags& ef, const LatencyFlags& f) {
  auto engine_r = make_engine(ef, f.options.batch_size);
  if (!engine_r.is_ok()) {
    log_error(engine_r.status().message());
    return 1;
  }
  Engine& engine = *engine_r.value();
  const Status s = check_lengths(engine, f.options.input_len, f.options.output_len);
  if (!s.is_ok()) {
    log_error(s.message());
    return 1;
  }
  auto constraint = bench_constraint(engine, f);
  if (!constraint.is_ok()) {
    log_error(constraint.status().message());
    return 1;
  }
  LatencyOptions plain = f.options;
  plain.constraint = nullptr;
  auto r = run_latency_benchmark(engine, plain);
  if (!r.is_ok()) {
    log_error(r.status().message());
    return 1;
  }
  print_latency(r.value());
  if (!constraint.value()) {
    std::fflush(stdout);
    return write_json(f.json, latency_json(r.value())) ? 0 : 1;
  }
  LatencyOptions guided = f.options;
  guided.constraint = constraint.value();
  auto c = run_latency_benchmark(engine, guided);
  if (!c.is_ok()) {
    log_error(c.status().message());
    return 1;
  }
  std::printf("With the grammar (every request constrained, one shared grammar):\n");
  print_latency(c.value());
  const double base = r.value().tpot_s.mean, with = c.value().tpot_s.mean;
  const double overhead = base > 0 ? (with - base) / base : 0.0;
  std::printf("Constrained-decoding overhead: TPOT %.3f ms -> %.3f ms (%+.1f%%) at batch %d\n",
              1000 * base, 1000 * with, 100 * overhead, f.options.batch_size);
  std::fflush(stdout);
  const nlohmann::json j = {{"unconstrained", nlohmann::json::parse(latency_json(r.value()))},
                            {"constrained", nlohmann::json::parse(latency_json(c.value()))},
                            {"tpot_overhead", overhead}};
  return write_json(f.json, j.dump(2)) ? 0 : 1;
}

}  // namespace

void register_bench(CLI::App& app, int* exit_code) {
  CLI::App* bench =
      app.add_subcommand("bench", "Benchmarks: offline throughput and latency, and HTTP serving");
  bench->require_subcommand(1);

  {
    auto ef = std::make_shared<EngineFlags>();
    auto f = std::make_shared<ThroughputFlags>();
    CLI::App* cmd = bench->add_subcommand(
        "throughput",
        "Offline throughput: all requests at once; requests/s, total and output tokens/s");
    cmd->add_option("--num-prompts", f->num_prompts, "requests to run")
        ->check(CLI::Range(1, 10000000))
        ->capture_default_str();
    cmd->add_option("--input-len", f->input_len, "prompt tokens (random, prefix)")
        ->check(CLI::Range(1, 1 << 24))
        ->capture_default_str();
    cmd->add_option("--output-len", f->output_len, "generated tokens per request (EOS ignored)")
        ->check(CLI::Range(1, 1 << 24))
        ->capture_default_str();
    cmd->add_option(
           "--dataset", f->dataset,
           "random, prefix (every prompt starts with the same --prefix-len tokens, default 512), "
           "or a .jsonl file ({\"prompt\": ...} or {\"prompt_token_ids\": [...]}, optional "
           "\"output_len\")")
        ->capture_default_str();
    cmd->add_option("--prefix-len", f->prefix_len, "shared prefix tokens before each random prompt")
        ->capture_default_str();
    cmd->add_option("--range-ratio", f->range_ratio, "lengths vary uniformly within ±ratio")
        ->check(CLI::Range(0.0, 0.99))
        ->capture_default_str();
    cmd->add_option("--seed", f->seed, "dataset seed")->capture_default_str();
    cmd->add_option("--json", f->json, "write the results as JSON to this file");
    add_engine_flags(*cmd, *ef);
    cmd->callback([=] { *exit_code = run_throughput(*ef, *f); });
  }
  {
    auto ef = std::make_shared<EngineFlags>();
    auto f = std::make_shared<LatencyFlags>();
    CLI::App* cmd = bench->add_subcommand(
        "latency",
        "Latency of one batch run to completion: per-iteration latency percentiles, TTFT, TPOT");
    LatencyOptions& o = f->options;
    cmd->add_option("--batch-size", o.batch_size, "requests per batch")
        ->check(CLI::Range(1, 65536))
        ->capture_default_str();
    cmd->add_option("--input-len", o.input_len,
                    "prompt tokens (random ids, new for each iteration)")
        ->check(CLI::Range(1, 1 << 24))
        ->capture_default_str();
    cmd->add_option("--output-len", o.output_len, "generated tokens per request (EOS ignored)")
        ->check(CLI::Range(1, 1 << 24))
        ->capture_default_str();
    cmd->add_option("--num-iters-warmup", o.num_iters_warmup, "unmeasured iterations first")
        ->check(CLI::Range(0, 100000))
        ->capture_default_str();
    cmd->add_option("--num-iters", o.num_iters, "measured iterations")
        ->check(CLI::Range(1, 100000))
        ->capture_default_str();
    cmd->add_option("--seed", o.seed, "prompt seed")->capture_default_str();
    cmd->add_option("--guided-json", f->guided_json,
                    "a JSON schema file: run the batch unconstrained, then with every request "
                    "constrained to the schema, and report the TPOT overhead");
    cmd->add_option("--guided-regex", f->guided_regex,
                    "as --guided-json, with a regular expression");
    cmd->add_option("--json", f->json, "write the results as JSON to this file");
    add_engine_flags(*cmd, *ef);
    cmd->callback([=] { *exit_code = run_latency(*ef, *f); });
  }
  register_bench_serve(*bench, exit_code);
}

}  // namespace lathe::cli
