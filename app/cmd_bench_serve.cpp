// `lathe bench serve`: a load generator for any OpenAI-compatible server (Lathe, vLLM, SGLang,
// llama-server, ...), with vLLM benchmark_serving's flags and metric definitions
// (engine/bench/serve_bench_metrics.h). Its own HTTP client; no Python.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <limits>
#include <mutex>

#include "app/commands.h"
#include "engine/bench/http_client.h"
#include "engine/bench/load_generator.h"
#include "engine/bench/serve_bench_dataset.h"
#include "engine/bench/serve_bench_metrics.h"
#include "engine/core/atomic_file.h"
#include "engine/core/log.h"
#include "engine/core/strings.h"

namespace lathe::cli {
namespace {

using json = nlohmann::json;

struct BenchServeFlags {
  std::string base_url = "http://127.0.0.1:8000";
  std::string model;
  std::string endpoint = "/v1/completions";
  int num_prompts = 1000;
  std::string request_rate = "inf";
  int max_concurrency = 0;
  std::string dataset = "random";
  int input_len = 1024;
  int output_len = 128;
  double range_ratio = 0.0;
  int prefix_len = 0;
  uint64_t seed = 0;
  bool ignore_eos = false;
  std::string sweep;
  std::string json_out;
  double slo_ttft_ms = 0;
  double slo_tpot_ms = 0;
  std::string api_key;
  std::string prompt_format = "auto";
  int64_t vocab_size = 0;
  bool no_progress = false;
  bool skip_test_request = false;
  int timeout_s = 600;
};

// A progress bar on stderr: redrawn in place on a terminal, a line per 10% otherwise.
class ProgressBar {
 public:
  ProgressBar(bool enabled, std::string label)
      : enabled_(enabled),
        tty_(isatty(STDERR_FILENO) == 1),
        label_(std::move(label)),
        start_(std::chrono::steady_clock::now()) {}
  void update(int32_t done, int32_t failed, int32_t total) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    if (tty_) {
      if (done != total && now - last_ < std::chrono::milliseconds(100)) return;
      last_ = now;
      const int width = 30;
      const int filled = total > 0 ? done * width / total : width;
      std::fprintf(stderr, "\r%s [%s%s] %d/%d", label_.c_str(), std::string(filled, '#').c_str(),
                   std::string(width - filled, '.').c_str(), done, total);
      if (failed > 0) std::fprintf(stderr, " (%d failed)", failed);
      std::fprintf(stderr, " %.1fs ", elapsed);
      if (done == total) std::fprintf(stderr, "\n");
      std::fflush(stderr);
    } else {
      const int decile = total > 0 ? done * 10 / total : 10;
      if (decile <= last_decile_) return;
      last_decile_ = decile;
      std::fprintf(stderr, "%s %d/%d requests done%s, %.1fs\n", label_.c_str(), done, total,
                   failed > 0 ? strformat(" (%d failed)", failed).c_str() : "", elapsed);
    }
  }

 private:
  bool enabled_, tty_;
  std::string label_;
  std::chrono::steady_clock::time_point start_, last_{};
  int last_decile_ = 0;
};

Result<double> parse_rate(const std::string& s) {
  if (s == "inf" || s == "Inf" || s == "infinity") return std::numeric_limits<double>::infinity();
  char* end = nullptr;
  const double r = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0' || !(r > 0))
    return invalid_argument("--request-rate must be > 0 or inf, got '" + s + "'");
  return r;
}

Result<std::vector<int32_t>> parse_levels(const std::string& s) {
  std::vector<int32_t> out;
  for (const std::string& part : split(s, ',')) {
    const std::string t(trim(part));
    char* end = nullptr;
    const long v = std::strtol(t.c_str(), &end, 10);
    if (t.empty() || *end != '\0' || v < 1 || v > 100000)
      return invalid_argument("--sweep-concurrency takes positive integers like 1,4,16,64, got '" +
                              s + "'");
    out.push_back(static_cast<int32_t>(v));
  }
  return out;
}

// The first model the server lists, and its vocabulary size when it reports one (Lathe does).
struct ServerModel {
  std::string id;
  int64_t vocab_size = 0;
};

Result<ServerModel> query_model(const Url& url, const std::string& api_key) {
  HttpClientRequest req;
  req.path = "/v1/models";
  if (!api_key.empty()) req.headers.emplace_back("Authorization", "Bearer " + api_key);
  req.timeout_ms = 30000;
  LATHE_ASSIGN_OR_RETURN(HttpClientResponse res, http_request(url, req));
  if (res.status != 200)
    return io_error(strformat("GET %s/v1/models answered HTTP %d: %s", url.to_string().c_str(),
                              res.status, res.body.substr(0, 300).c_str()));
  const json j = json::parse(res.body, nullptr, false);
  if (j.is_discarded() || !j.contains("data") || !j["data"].is_array() || j["data"].empty() ||
      !j["data"][0].contains("id") || !j["data"][0]["id"].is_string())
    return io_error("GET /v1/models did not list a model; pass --model");
  ServerModel m;
  m.id = j["data"][0]["id"].get<std::string>();
  if (j["data"][0].contains("vocab_size") && j["data"][0]["vocab_size"].is_number_integer())
    m.vocab_size = j["data"][0]["vocab_size"].get<int64_t>();
  return m;
}

json run_config_json(const BenchServeFlags& f, const LoadGenOptions& o, bool token_ids) {
  char date[32];
  const std::time_t t = std::time(nullptr);
  std::strftime(date, sizeof(date), "%Y%m%d-%H%M%S", std::localtime(&t));
  return {{"date", date},
          {"backend", "openai"},
          {"base_url", o.base_url.to_string()},
          {"endpoint", o.endpoint},
          {"model_id", o.model},
          {"dataset", f.dataset},
          {"prompt_format", token_ids ? "token-ids" : "text"},
          {"num_prompts", f.num_prompts},
          {"request_rate", std::isfinite(o.request_rate) ? json(o.request_rate) : json("inf")},
          {"max_concurrency", o.max_concurrency > 0 ? json(o.max_concurrency) : json()},
          {"input_len", f.input_len},
          {"output_len", f.output_len},
          {"range_ratio", f.range_ratio},
          {"prefix_len", f.prefix_len},
          {"seed", f.seed},
          {"ignore_eos", f.ignore_eos}};
}

int run_bench_serve(const BenchServeFlags& f) {
  Result<Url> url = parse_url(f.base_url);
  if (!url.is_ok()) {
    log_error("--base-url " + url.status().message());
    return 2;
  }
  Result<double> rate = parse_rate(f.request_rate);
  if (!rate.is_ok()) {
    log_error(rate.status().message());
    return 2;
  }
  std::vector<int32_t> levels;
  if (!f.sweep.empty()) {
    Result<std::vector<int32_t>> l = parse_levels(f.sweep);
    if (!l.is_ok()) {
      log_error(l.status().message());
      return 2;
    }
    levels = l.value();
  }
  if (f.endpoint != "/v1/completions" && f.endpoint != "/v1/chat/completions") {
    log_error("--endpoint must be /v1/completions or /v1/chat/completions, got '" + f.endpoint +
              "'");
    return 2;
  }
  std::string api_key = f.api_key;
  for (const char* env : {"LATHE_API_KEY", "OPENAI_API_KEY"}) {
    if (const char* k = std::getenv(env); api_key.empty() && k != nullptr) api_key = k;
  }

  LoadGenOptions o;
  o.base_url = url.value();
  o.endpoint = f.endpoint;
  o.api_key = api_key;
  o.request_rate = rate.value();
  o.max_concurrency = f.max_concurrency;
  o.ignore_eos = f.ignore_eos;
  o.seed = f.seed;
  o.timeout_s = f.timeout_s;
  o.model = f.model;

  // The model name (and, from Lathe, the vocabulary size for exact token-id prompts).
  int64_t vocab = f.vocab_size;
  const bool wants_ids_auto = f.prompt_format == "auto" && f.endpoint == "/v1/completions";
  if (o.model.empty() || (wants_ids_auto && vocab == 0) ||
      (f.prompt_format == "token-ids" && vocab == 0)) {
    Result<ServerModel> m = query_model(o.base_url, api_key);
    if (!m.is_ok()) {
      log_error(m.status().message() +
                (o.model.empty() ? " (pass --model to skip this query)" : ""));
      if (o.model.empty()) return 1;
    } else {
      if (o.model.empty()) o.model = m->id;
      if (vocab == 0) vocab = m->vocab_size;
    }
  }
  bool token_ids = f.prompt_format == "token-ids" || (wants_ids_auto && vocab > 0);
  if (f.prompt_format == "token-ids" && f.endpoint != "/v1/completions") {
    log_error("--prompt-format token-ids needs --endpoint /v1/completions");
    return 2;
  }
  if (token_ids && vocab <= 0) {
    log_error(
        "--prompt-format token-ids needs the vocabulary size: pass --vocab-size (the server did "
        "not report it)");
    return 2;
  }
  if (f.dataset != "random" && f.dataset != "prefix")
    token_ids = false;  // a file says what it holds

  DatasetOptions d;
  d.dataset = f.dataset;
  d.input_len = f.input_len;
  d.output_len = f.output_len;
  d.range_ratio = f.range_ratio;
  d.prefix_len = f.prefix_len;
  d.seed = f.seed;
  d.token_ids = token_ids;
  d.vocab_size = vocab;
  const GoodputSlo slo{f.slo_ttft_ms, f.slo_tpot_ms};

  log_info(strformat("benchmarking %s%s, model %s, %s prompts (%s)", o.base_url.to_string().c_str(),
                     o.endpoint.c_str(), o.model.c_str(), token_ids ? "token-id" : "text",
                     f.dataset.c_str()));
  if (!f.skip_test_request) {
    // One request first, as vLLM's benchmark does, so a wrong URL, key or model fails fast.
    d.num_prompts = 1;
    Result<std::vector<BenchPrompt>> one = make_bench_dataset(d);
    if (!one.is_ok()) {
      log_error(one.status().message());
      return 2;
    }
    const RequestOutput test = send_bench_request(o, one->front());
    if (!test.success) {
      log_error("the initial test request failed: " + test.error);
      return 1;
    }
  }

  auto run_once = [&](int32_t num_prompts, const LoadGenOptions& opts, const std::string& label,
                      LoadGenResult* result) -> Result<ServeBenchMetrics> {
    DatasetOptions dd = d;
    dd.num_prompts = num_prompts;
    LATHE_ASSIGN_OR_RETURN(std::vector<BenchPrompt> prompts, make_bench_dataset(dd));
    ProgressBar bar(!f.no_progress, label);
    std::mutex m;
    LATHE_ASSIGN_OR_RETURN(
        *result, run_load(opts, prompts, [&](int32_t done, int32_t failed, int32_t total) {
          std::lock_guard<std::mutex> lock(m);
          bar.update(done, failed, total);
        }));
    return compute_serve_metrics(*result, slo);
  };

  json out = run_config_json(f, o, token_ids);
  bool any_completed = false;
  if (levels.empty()) {
    LoadGenResult result;
    Result<ServeBenchMetrics> m = run_once(f.num_prompts, o, "requests", &result);
    if (!m.is_ok()) {
      log_error(m.status().message());
      return 2;
    }
    std::printf("%s", format_serve_report(m.value(), slo).c_str());
    std::fflush(stdout);
    any_completed = m->completed > 0;
    out.update(serve_metrics_json(m.value()));
    out.update(per_request_json(result));
  } else {
    std::vector<ServeBenchMetrics> rows;
    json sweep = json::array();
    for (const int32_t level : levels) {
      LoadGenOptions lo = o;
      lo.max_concurrency = level;
      const int32_t n = std::max(f.num_prompts, level);
      LoadGenResult result;
      Result<ServeBenchMetrics> m = run_once(n, lo, strformat("concurrency %d", level), &result);
      if (!m.is_ok()) {
        log_error(m.status().message());
        return 2;
      }
      std::fprintf(stderr,
                   "concurrency %d: %d ok, %d failed, %.1f output tok/s, mean TTFT %.1f ms, mean "
                   "ITL %.2f ms\n",
                   level, m->completed, m->failed, m->output_throughput, m->ttft.mean_ms,
                   m->itl.mean_ms);
      any_completed |= m->completed > 0;
      json row = serve_metrics_json(m.value());
      row["max_concurrency"] = level;
      row["num_prompts"] = n;
      sweep.push_back(row);
      rows.push_back(m.value());
    }
    std::printf("%s", format_sweep_table(levels, rows).c_str());
    std::fflush(stdout);
    out["sweep"] = sweep;
  }
  if (!f.json_out.empty()) {
    // Atomic: an interrupted run leaves the previous results, never half a file.
    const Status st = write_file_atomically(
        f.json_out, out.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
    if (!st.is_ok()) {
      log_error("cannot write --json: " + st.message());
      return 1;
    }
    log_info("results written to " + f.json_out);
  }
  if (!any_completed) {
    log_error("no request completed; see the errors above");
    return 1;
  }
  return 0;
}

}  // namespace

void register_bench_serve(CLI::App& bench, int* exit_code) {
  auto f = std::make_shared<BenchServeFlags>();
  CLI::App* cmd = bench.add_subcommand("serve",
                                       "Load-test an OpenAI-compatible server (TTFT, TPOT, ITL, "
                                       "E2E, throughput; vLLM's definitions)");
  cmd->add_option("--base-url", f->base_url, "server URL, e.g. http://127.0.0.1:8000")
      ->capture_default_str();
  cmd->add_option("--model", f->model,
                  "model name to send (default: the first one the server lists)");
  cmd->add_option("--endpoint", f->endpoint, "/v1/completions or /v1/chat/completions")
      ->capture_default_str();
  cmd->add_option("--num-prompts", f->num_prompts,
                  "requests to send (per sweep level: at least the level)")
      ->check(CLI::Range(1, 10000000))
      ->capture_default_str();
  cmd->add_option("--request-rate", f->request_rate,
                  "requests per second, Poisson arrivals; inf sends all at once")
      ->capture_default_str();
  cmd->add_option("--max-concurrency", f->max_concurrency,
                  "most requests in flight at once (0: no cap)")
      ->check(CLI::Range(0, 1000000));
  cmd->add_option("--dataset", f->dataset,
                  "random, prefix (shared prefix of --prefix-len), or a .jsonl file")
      ->capture_default_str();
  cmd->add_option("--input-len", f->input_len, "prompt tokens (prefix: after the shared prefix)")
      ->capture_default_str();
  cmd->add_option("--output-len", f->output_len, "max_tokens per request")->capture_default_str();
  cmd->add_option("--range-ratio", f->range_ratio,
                  "lengths vary uniformly within ±ratio of --input/--output-len")
      ->capture_default_str();
  cmd->add_option("--prefix-len", f->prefix_len,
                  "shared prefix tokens (prefix dataset default: 512)");
  cmd->add_option("--seed", f->seed, "seed for prompts and arrival times")->capture_default_str();
  cmd->add_flag("--ignore-eos", f->ignore_eos,
                "ask the server to generate exactly --output-len tokens (vLLM's ignore_eos)");
  cmd->add_option("--sweep-concurrency", f->sweep,
                  "run each concurrency level, e.g. 1,4,16,64,128,300, and print a table");
  cmd->add_option("--json", f->json_out, "write the results (and per-request data) as JSON here");
  cmd->add_option("--slo-ttft-ms", f->slo_ttft_ms,
                  "goodput objective for time to first token (ms)");
  cmd->add_option("--slo-tpot-ms", f->slo_tpot_ms,
                  "goodput objective for time per output token (ms)");
  cmd->add_option(
      "--api-key", f->api_key,
      "sent as 'Authorization: Bearer KEY' (default: $LATHE_API_KEY, else $OPENAI_API_KEY)");
  cmd->add_option("--prompt-format", f->prompt_format,
                  "auto (token ids when the server reports its vocabulary, as Lathe does), text, "
                  "or token-ids")
      ->check(CLI::IsMember({"auto", "text", "token-ids"}))
      ->capture_default_str();
  cmd->add_option("--vocab-size", f->vocab_size,
                  "vocabulary size for token-id prompts (default: from /v1/models)");
  cmd->add_option("--timeout", f->timeout_s, "seconds a request may wait for its next chunk")
      ->capture_default_str();
  cmd->add_flag("--no-progress", f->no_progress, "no progress bar on stderr");
  cmd->add_flag("--skip-test-request", f->skip_test_request,
                "do not send the initial single test request");
  cmd->callback([f, exit_code] { *exit_code = run_bench_serve(*f); });
}

}  // namespace lathe::cli
