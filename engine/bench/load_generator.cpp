#include "engine/bench/load_generator.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <cmath>
#include <mutex>
#include <random>
#include <thread>

#include "engine/bench/sse_parser.h"
#include "engine/core/strings.h"

namespace lathe {
namespace {

using json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

double seconds(SteadyClock::time_point a, SteadyClock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

bool is_chat(const LoadGenOptions& o) {
  return o.endpoint.find("chat") != std::string::npos;
}

// What one streamed response told us so far.
struct StreamState {
  SteadyClock::time_point start;
  SteadyClock::time_point piece_time;  // arrival of the body piece being parsed
  SteadyClock::time_point last_chunk;
  bool first = false;
  bool done = false;
  std::string error;
  int32_t text_chunks = 0;
  int32_t usage_completion = -1;
  int32_t usage_prompt = -1;
  std::string raw;  // the first bytes of the body, for error messages
};

std::string error_message(const std::string& body) {
  const json j = json::parse(body, nullptr, false);
  if (!j.is_discarded() && j.is_object() && j.contains("error")) {
    const json& e = j["error"];
    if (e.is_object() && e.contains("message") && e["message"].is_string())
      return e["message"].get<std::string>();
    if (e.is_string()) return e.get<std::string>();
  }
  return body.substr(0, 300);
}

}  // namespace

std::string make_request_body(const LoadGenOptions& o, const BenchPrompt& p) {
  json body = {{"model", o.model},
               {"temperature", 0.0},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  if (is_chat(o)) {
    body["messages"] = json::array({{{"role", "user"}, {"content", p.text}}});
    body["max_completion_tokens"] = p.output_len;
  } else {
    if (!p.token_ids.empty())
      body["prompt"] = p.token_ids;
    else
      body["prompt"] = p.text;
    body["max_tokens"] = p.output_len;
  }
  if (o.ignore_eos) body["ignore_eos"] = true;
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

RequestOutput send_bench_request(const LoadGenOptions& o, const BenchPrompt& p,
                                 std::unique_ptr<HttpConnection>* conn) {
  RequestOutput out;
  out.prompt_len = p.prompt_len;
  if (is_chat(o) && !p.token_ids.empty()) {
    out.error = "token-id prompts need /v1/completions; chat takes text";
    return out;
  }
  HttpClientRequest req;
  req.method = "POST";
  req.path = o.endpoint;
  req.headers = {{"Content-Type", "application/json"}, {"Accept", "text/event-stream"}};
  if (!o.api_key.empty()) req.headers.emplace_back("Authorization", "Bearer " + o.api_key);
  req.body = make_request_body(o, p);
  req.timeout_ms = o.timeout_s * 1000;

  const bool chat = is_chat(o);
  for (int attempt = 0; attempt < 2; ++attempt) {
    StreamState st;
    SseParser parser([&](const std::string& data) {
      if (data == "[DONE]") {
        st.done = true;
        return true;
      }
      const json j = json::parse(data, nullptr, false);
      if (j.is_discarded() || !j.is_object()) {
        st.error = "the server sent a chunk that is not JSON: " + data.substr(0, 120);
        return false;
      }
      if (j.contains("error")) {
        st.error = "error in stream: " + error_message(data);
        return false;
      }
      auto choices = j.find("choices");
      if (choices != j.end() && choices->is_array() && !choices->empty()) {
        const json& c0 = (*choices)[0];
        std::string text;
        if (chat) {
          auto delta = c0.find("delta");
          if (delta != c0.end() && delta->is_object()) {
            auto content = delta->find("content");
            if (content != delta->end() && content->is_string()) text = content->get<std::string>();
          }
        } else if (auto t = c0.find("text"); t != c0.end() && t->is_string()) {
          text = t->get<std::string>();
        }
        if (!st.first) {
          st.first = true;
          out.ttft_s = seconds(st.start, st.piece_time);
        } else {
          out.itl_s.push_back(seconds(st.last_chunk, st.piece_time));
        }
        st.last_chunk = st.piece_time;
        out.generated_text += text;
        if (!text.empty()) ++st.text_chunks;
      }
      auto usage = j.find("usage");
      if (usage != j.end() && usage->is_object()) {
        if (auto c = usage->find("completion_tokens"); c != usage->end() && c->is_number_integer())
          st.usage_completion = c->get<int32_t>();
        if (auto pt = usage->find("prompt_tokens"); pt != usage->end() && pt->is_number_integer())
          st.usage_prompt = pt->get<int32_t>();
      }
      return true;
    });
    const bool reused = conn != nullptr && *conn && (*conn)->is_open();
    std::unique_ptr<HttpConnection> fresh;
    if (!reused) {
      Result<std::unique_ptr<HttpConnection>> made = HttpConnection::connect(o.base_url, 10000);
      if (!made.is_ok()) {
        out.error = made.status().message();
        return out;
      }
      fresh = std::move(made).value();
    }
    HttpConnection* c = reused ? conn->get() : fresh.get();
    st.start = SteadyClock::now();
    Result<HttpClientResponse> res = c->request(req, [&](std::string_view piece) {
      st.piece_time = SteadyClock::now();
      if (st.raw.size() < 4096) st.raw.append(piece.substr(0, 4096 - st.raw.size()));
      return parser.feed(piece);
    });
    if (!res.is_ok()) {
      c->close();
      // A kept-alive connection the server had already closed: try once more on a fresh one.
      if (reused && !st.first && st.raw.empty()) continue;
      out.error = res.status().message();
      return out;
    }
    parser.finish();
    if (!res.value().keep_alive || !st.done) c->close();
    if (conn != nullptr && fresh && c->is_open()) *conn = std::move(fresh);
    if (res.value().status != 200) {
      out.error = strformat("HTTP %d: %s", res.value().status, error_message(st.raw).c_str());
      return out;
    }
    if (!st.error.empty()) {
      out.error = st.error;
      return out;
    }
    if (!st.first) {
      out.error = "Never received a valid chunk to calculate TTFT.";
      return out;
    }
    out.latency_s = seconds(st.start, st.last_chunk);
    out.output_tokens = st.usage_completion >= 0 ? st.usage_completion : st.text_chunks;
    if (st.usage_prompt >= 0) out.prompt_len = st.usage_prompt;
    out.success = true;
    return out;
  }
  return out;
}

Result<LoadGenResult> run_load(const LoadGenOptions& o, const std::vector<BenchPrompt>& prompts,
                               const LoadGenProgress& progress) {
  if (!(o.request_rate > 0)) return invalid_argument("--request-rate must be > 0 (or inf)");
  if (o.max_concurrency < 0) return invalid_argument("--max-concurrency must be >= 0");
  const int32_t n = static_cast<int32_t>(prompts.size());
  LoadGenResult result;
  result.outputs.resize(prompts.size());
  if (n == 0) return result;

  // Arrival offsets: Poisson process (exponential gaps), or all at 0 for an infinite rate.
  std::vector<double> arrival(prompts.size(), 0.0);
  if (std::isfinite(o.request_rate)) {
    std::mt19937_64 rng(o.seed ^ 0x5eedULL);
    std::exponential_distribution<double> gap(o.request_rate);
    double t = 0.0;
    for (int32_t i = 0; i < n; ++i) {
      arrival[static_cast<size_t>(i)] = t;
      t += gap(rng);
    }
  }
  // One worker per concurrency slot: request i goes out at its arrival time or, when every slot is
  // busy, as soon as one frees up (first come, first served), as vLLM's semaphore does.
  constexpr int32_t kMaxWorkers = 4096;
  int32_t workers = o.max_concurrency > 0 ? std::min(o.max_concurrency, n) : n;
  workers = std::min(workers, kMaxWorkers);

  std::atomic<int32_t> next{0};
  std::mutex progress_mutex;
  int32_t done = 0, failed = 0;
  const SteadyClock::time_point start = SteadyClock::now();
  auto worker = [&] {
    std::unique_ptr<HttpConnection> conn;
    for (;;) {
      const int32_t i = next.fetch_add(1);
      if (i >= n) break;
      std::this_thread::sleep_until(
          start + std::chrono::duration_cast<SteadyClock::duration>(
                      std::chrono::duration<double>(arrival[static_cast<size_t>(i)])));
      const double sent = seconds(start, SteadyClock::now());
      RequestOutput r = send_bench_request(o, prompts[static_cast<size_t>(i)], &conn);
      r.start_s = sent;
      const bool ok = r.success;
      result.outputs[static_cast<size_t>(i)] = std::move(r);
      std::lock_guard<std::mutex> lock(progress_mutex);
      ++done;
      if (!ok) ++failed;
      if (progress) progress(done, failed, n);
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(workers));
  for (int32_t w = 0; w < workers; ++w) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  result.duration_s = seconds(start, SteadyClock::now());
  return result;
}

}  // namespace lathe
