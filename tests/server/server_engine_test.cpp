// The server on the real engine (CPU backend, the default model): a client that disconnects
// mid-stream frees its KV blocks at once; 200+ malformed and hostile requests each get a 4xx JSON
// error and leave the server alive and correct; 300 concurrent streaming requests all complete
// with the tokens they asked for while /health keeps answering (median under 10 ms, at most 2%
// at or over 100 ms, none over a second), and afterwards the KV cache is empty and no request
// remains. Checked through /metrics, as an operator would. And /tokenizer_info agrees with
// /tokenize as lm-eval's remote tokenizer uses them.
#include <QtTest>

#include <atomic>
#include <filesystem>
#include <thread>

#include "engine/runtime/engine.h"
#include "engine/server/api_server.h"
#include "server_test_util.h"
#include "test_support.h"

using namespace lathe;
using namespace lathe::test;

namespace {

using SteadyClock = std::chrono::steady_clock;

double ms_since(SteadyClock::time_point t) {
  return std::chrono::duration<double, std::milli>(SteadyClock::now() - t).count();
}

// A raw request: bytes sent as they are (for framing and header abuse).
struct RawCase {
  std::string name;
  std::string bytes;
};

std::string post(const std::string& path, const std::string& body,
                 const std::string& extra_headers = {}) {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
         extra_headers + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

}  // namespace

class ServerEngineTest : public QObject {
  Q_OBJECT

  std::unique_ptr<Engine> engine_;
  std::unique_ptr<ApiServer> server_;
  Url url_;

  std::string metrics() { return http_call(url_, "GET", "/metrics").body; }

  // The server has nothing left: no request running or waiting, no KV block held.
  void verify_idle() {
    QTRY_COMPARE_WITH_TIMEOUT(engine_->num_unfinished_requests(), 0, scaled_ms(5000));
    QTRY_COMPARE_WITH_TIMEOUT(server_->stats().requests_in_flight, int64_t{0}, scaled_ms(5000));
    const std::string m = metrics();
    QCOMPARE(prometheus_value(m, "lathe:num_requests_running"), 0.0);
    QCOMPARE(prometheus_value(m, "lathe:num_requests_waiting"), 0.0);
    QCOMPARE(prometheus_value(m, "lathe:kv_cache_usage_perc"), 0.0);
    QCOMPARE(prometheus_value(m, "lathe:kv_cache_blocks", "state=\"used\""), 0.0);
  }

  // One greedy chat answer, to show the server still works and answers correctly.
  std::string chat_answer() {
    const json body = {
        {"messages", {{{"role", "user"}, {"content", "What is the capital of France?"}}}},
        {"max_tokens", 8},
        {"temperature", 0}};
    HttpClientResponse r = http_call(url_, "POST", "/v1/chat/completions", body.dump());
    if (r.status != 200) return "HTTP " + std::to_string(r.status) + ": " + r.body;
    return parse_json(r.body)["choices"][0]["message"]["content"].get<std::string>();
  }

 private slots:
  void initTestCase() {
    if (!std::filesystem::exists(test::default_model_path()))
      QSKIP("the default model is not in the cache; run scripts/fetch-default-model.sh");
    EngineConfig c;
    c.model_path = test::default_model_path();
    c.device.device = DeviceKind::kCpu;
    c.scheduler.max_model_len = 1024;
    Result<std::unique_ptr<Engine>> e = Engine::create(c);
    LATHE_QVERIFY_RESULT(e);
    engine_ = std::move(e).value();
    ServerConfig sc;
    sc.port = 0;
    sc.max_body_bytes = 4 << 20;
    sc.read_timeout_ms = 1000;
    sc.log_requests = false;
    Result<std::unique_ptr<ApiServer>> s = ApiServer::start(*engine_, sc);
    LATHE_QVERIFY_RESULT(s);
    server_ = std::move(s).value();
    url_ = local_url(server_->port());
  }

  void cleanupTestCase() {
    if (server_) server_->stop(std::chrono::milliseconds(0));
    server_.reset();
    engine_.reset();
  }

  // What lm-eval's tokenizer_backend=remote does with a server (lm_eval.utils.RemoteTokenizer):
  // it reads BOS/EOS as text from /tokenizer_info and takes the first id /tokenize gives that text
  // without special tokens added; those must be the ids /tokenizer_info names, and /detokenize of
  // the ids gives the text back. The chat template is the model's.
  void tokenizer_info_agrees_with_tokenize() {
    HttpClientResponse r = http_call(url_, "GET", "/tokenizer_info");
    QCOMPARE(r.status, 200);
    const json info = parse_json(r.body);
    const LoadedModel& m = engine_->model();
    QCOMPARE(info["model_max_length"].get<int>(), 1024);
    QCOMPARE(info["vocab_size"].get<int64_t>(), m.tokenizer->vocab_size());
    QVERIFY(!m.chat_template.empty());
    QCOMPARE(info["chat_template"].get<std::string>(), m.chat_template);
    for (const char* name : {"bos", "eos"}) {
      const std::string key = std::string(name) + "_token";
      QVERIFY2(info[key].is_string() && info[key + "_id"].is_number_integer(), r.body.c_str());
      const int id = info[key + "_id"].get<int>();
      const std::string text = info[key].get<std::string>();
      HttpClientResponse t =
          http_call(url_, "POST", "/tokenize",
                    json({{"prompt", text}, {"add_special_tokens", false}}).dump());
      QCOMPARE(t.status, 200);
      QCOMPARE(parse_json(t.body)["tokens"], json({id}));
      HttpClientResponse d =
          http_call(url_, "POST", "/detokenize", json({{"tokens", {id}}}).dump());
      QCOMPARE(d.status, 200);
      QCOMPARE(parse_json(d.body)["prompt"].get<std::string>(), text);
    }
  }

  void disconnect_mid_stream_frees_its_blocks() {
    const std::string before = metrics();
    const double aborts_before =
        prometheus_value(before, "lathe:request_success_total", "finished_reason=\"abort\"");
    auto conn = HttpConnection::connect(url_);
    LATHE_QVERIFY_RESULT(conn);
    HttpClientRequest req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = json({{"prompt", "Once upon a time"},
                     {"max_tokens", 900},
                     {"ignore_eos", true},
                     {"stream", true}})
                   .dump();
    int chunks = 0;
    double used_while_streaming = 0;
    Result<HttpClientResponse> r = conn.value()->request(req, [&](std::string_view piece) {
      chunks += static_cast<int>(std::count(piece.begin(), piece.end(), '\n')) / 2;
      if (chunks < 3) return true;
      used_while_streaming = prometheus_value(metrics(), "lathe:kv_cache_blocks", "state=\"used\"");
      return false;  // closes the connection mid-stream
    });
    LATHE_QVERIFY_RESULT(r);
    const auto closed = SteadyClock::now();
    QVERIFY2(used_while_streaming >= 1, std::to_string(used_while_streaming).c_str());
    // Freed within a step or two, not after the 900 tokens it asked for.
    QTRY_VERIFY_WITH_TIMEOUT(
        prometheus_value(metrics(), "lathe:kv_cache_blocks", "state=\"used\"") == 0.0,
        scaled_ms(3000));
    const double freed_ms = ms_since(closed);
    qInfo("KV blocks in use while streaming: %.0f; freed %.0f ms after the client closed",
          used_while_streaming, freed_ms);
    const std::string after = metrics();
    QCOMPARE(prometheus_value(after, "lathe:request_success_total", "finished_reason=\"abort\""),
             aborts_before + 1);
    QVERIFY(prometheus_value(after, "lathe:http_client_disconnects_total") >= 1);
    verify_idle();
  }

  void hostile_requests_get_4xx_json_errors() {
    const std::string answer_before = chat_answer();
    QVERIFY2(!starts_with(answer_before, "HTTP "), answer_before.c_str());

    std::vector<RawCase> cases;
    auto add = [&](const std::string& name, const std::string& path, const std::string& body) {
      cases.push_back({name, post(path, body)});
    };
    const std::vector<std::string> endpoints = {"/v1/chat/completions", "/v1/completions",
                                                "/tokenize"};
    // Broken JSON, and JSON that is not an object.
    const std::vector<std::string> broken = {
        "{",
        "}",
        "{\"a\":",
        "[1,2",
        "nul",
        "tru",
        "{\"messages\": [}",
        "'single quotes'",
        "{a: 1}",
        "{\"x\": 1,}",
        "{} {}",
        "\"a string\"",
        "123",
        "null",
        "[]",
        "true",
        "{\"x\": NaN}",
        "{\"x\": Infinity}",
        "/* c */ {}",
        "{\"x\": 01}",
        "{\"x\": .5}",
        "{\"x\": \"\\q\"}",
        "{\"x\": \"\\u12\"}",
        "{\"x\": \"\x01\"}",
        "{\"x\": 1e999}",
        "\xef\xbb\xbf{}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]"};
    for (const std::string& ep : endpoints)
      for (size_t i = 0; i < broken.size(); ++i)
        add("broken json #" + std::to_string(i) + " " + ep, ep, broken[i]);

    // Wrong types and absurd values, one field at a time on an otherwise valid request.
    const json chat_base = {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                            {"max_tokens", 2}};
    const json comp_base = {{"prompt", "hi"}, {"max_tokens", 2}};
    const std::vector<std::pair<std::string, std::vector<json>>> bad_fields = {
        {"model", {1, json::array(), json::object(), true, "no-such-model"}},
        {"max_tokens",
         {"2", 1.5, -1, 0, 1e30, json(INT64_MAX), json(INT64_MIN), json(UINT64_MAX), 4096, true,
          json::array()}},
        {"temperature", {"hot", -0.1, 2.5, 1e308, json::array(), json::object(), false}},
        {"top_p", {0, -1, 1.5, "1", json::array()}},
        {"top_k", {-5, 1.5, "10", json(INT64_MAX)}},
        {"min_p", {-0.1, 1.1, "0"}},
        {"seed", {1.5, "42", json::array(), json::object()}},
        {"stop",
         {1, json::array({1, 2}), json::array({""}), json::object(),
          json::array({"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o",
                       "p", "q"})}},
        {"stream", {"yes", 1}},
        {"stream_options", {"x", json::object({{"include_usage", true}})}},
        {"n", {0, 17, -1, 1000000, "1", 1.0}},
        {"presence_penalty", {3, -3, "0"}},
        {"frequency_penalty", {2.5, json::array()}},
        {"repetition_penalty", {0, -1, 11, "1"}},
        {"ignore_eos", {"true", 1}},
        {"min_tokens", {-1, "3", 5.5}},
        {"stop_token_ids",
         {1, json::array({-1}), json::array({1e10}), json::array({"a"}), json::array({1 << 30})}},
        {"logit_bias",
         {json::object({{"x", 1}}), json::array(), json::object({{"1", 101}}),
          json::object({{"999999", 1}}), json::object({{"-1", 1}}), json::object({{"1", "a"}})}},
        {"user", {1, json::object()}},
        {"best_of", {2, "1"}},
        {"unknown_field", {1, "x", nullptr}},
        {"__proto__", {json::object()}},
    };
    for (const auto& [field, values] : bad_fields) {
      for (size_t i = 0; i < values.size(); ++i) {
        for (int endpoint = 0; endpoint < 2; ++endpoint) {
          json body = endpoint == 0 ? chat_base : comp_base;
          body[field] = values[i];
          add(field + " = " + values[i].dump(),
              endpoint == 0 ? "/v1/chat/completions" : "/v1/completions", body.dump());
        }
      }
    }
    // Endpoint-specific fields and prompt forms.
    const std::vector<std::pair<std::string, json>> chat_bad = {
        {"messages", json::array()},
        {"messages", "hi"},
        {"messages", json::array({"hi"})},
        {"messages", json::array({{{"role", "user"}}})},
        {"messages", json::array({{{"content", "x"}}})},
        {"messages", json::array({{{"role", "robot"}, {"content", "x"}}})},
        {"messages", json::array({{{"role", "user"}, {"content", 5}}})},
        {"messages",
         json::array({{{"role", "user"},
                       {"content", json::array({{{"type", "image_url"}, {"image_url", "x"}}})}}})},
        {"messages", json::array({{{"role", "user"}, {"content", json::array({5})}}})},
        {"messages",
         json::array({{{"role", "user"}, {"content", "x"}, {"tool_calls", json::array({1})}}})},
        {"logprobs", "yes"},
        {"top_logprobs", 5},
        {"max_completion_tokens", -3},
        {"tools", json::array({{{"type", "function"}}})},
        {"response_format", {{"type", "json_schema"}}},
        {"response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", {{"not", 1}}}}}}},
        {"guided_regex", "(?<=a)"},
        {"guided_choice", json::array()},
        {"tool_choice", "required"},
        {"prompt", "x"}};
    for (const auto& [field, v] : chat_bad) {
      json body = chat_base;
      body[field] = v;
      if (field == "top_logprobs") body.erase("logprobs");
      add("chat " + field + " = " + v.dump(), "/v1/chat/completions", body.dump());
    }
    json no_messages = chat_base;
    no_messages.erase("messages");
    add("chat without messages", "/v1/chat/completions", no_messages.dump());
    const std::vector<std::pair<std::string, json>> comp_bad = {
        {"prompt", json::array()},
        {"prompt", 5},
        {"prompt", json::array({"a", "b"})},
        {"prompt", json::array({-1})},
        {"prompt", json::array({49152 * 100})},
        {"prompt", json::array({1.5})},
        {"prompt", json::object()},
        {"prompt", json::array({json::array()})},
        {"logprobs", 21},
        {"logprobs", true},
        {"echo", "yes"},
        {"suffix", "x"},
        {"messages", json::array()},
        {"prompt", [] {
           std::string s;
           while (s.size() < 500000) s += "many words make a long prompt ";
           return s;
         }()}};
    for (const auto& [field, v] : comp_bad) {
      json body = comp_base;
      body[field] = v;
      add("completions " + field + " = " + v.dump().substr(0, 60), "/v1/completions", body.dump());
    }
    // prompt + max_tokens over max-model-len (1024).
    add("over the context", "/v1/completions",
        json({{"prompt", "hi"}, {"max_tokens", 1024}}).dump());
    // Deep nesting.
    for (const int depth : {65, 100, 1000, 100000}) {
      add("nested arrays " + std::to_string(depth), "/v1/completions",
          std::string(depth, '[') + std::string(depth, ']'));
      std::string obj;
      for (int i = 0; i < depth; ++i) obj += "{\"a\":";
      obj += "1" + std::string(depth, '}');
      add("nested objects " + std::to_string(depth), "/v1/chat/completions", obj);
    }
    // Invalid UTF-8 (raw bytes and escapes) in values and keys.
    const std::vector<std::string> bad_utf8 = {
        "\xff",    "\xc0\xaf", "\xed\xa0\x80", "\xe2\x82", "\xf8\x88\x80\x80\x80",
        "\\ud800", "\\udc00x", "abc\x80"};
    for (size_t i = 0; i < bad_utf8.size(); ++i) {
      add("utf8 in prompt #" + std::to_string(i), "/v1/completions",
          "{\"prompt\": \"x" + bad_utf8[i] + "\", \"max_tokens\": 2}");
      add("utf8 in content #" + std::to_string(i), "/v1/chat/completions",
          "{\"messages\": [{\"role\": \"user\", \"content\": \"" + bad_utf8[i] +
              "\"}], \"max_tokens\": 2}");
      add("utf8 in a key #" + std::to_string(i), "/v1/completions",
          "{\"p" + bad_utf8[i] + "\": 1}");
    }
    // Bodies over the limit (4 MiB here): 10 MB of junk, of JSON, of a prompt.
    cases.push_back({"10 MB of junk", post("/v1/completions", std::string(10 << 20, 'a'))});
    cases.push_back({"10 MB prompt", post("/v1/completions",
                                          json({{"prompt", std::string(10 << 20, 'x')}}).dump())});
    cases.push_back({"10 MB token ids", post(
                                            "/v1/completions", "{\"prompt\": [" + [] {
                                              std::string s;
                                              while (s.size() < (10u << 20)) s += "1,";
                                              return s + "1]}";
                                            }())});
    cases.push_back({"10 MB chunked", [] {
                       std::string s =
                           "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: "
                           "chunked\r\n\r\n";
                       for (int i = 0; i < 160; ++i)
                         s += "10000\r\n" + std::string(65536, 'z') + "\r\n";
                       return s + "0\r\n\r\n";
                     }()});
    // Headers without a body, and broken framing.
    cases.push_back(
        {"POST without a length", "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"});
    cases.push_back(
        {"empty body",
         "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n"});
    cases.push_back(
        {"announced body never sent",
         "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n"});
    cases.push_back({"short body",
                     "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: "
                     "100\r\n\r\n{\"prompt\": \"x\"}"});
    cases.push_back(
        {"bad Content-Length",
         "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: abc\r\n\r\n"});
    cases.push_back({"broken chunking",
                     "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: "
                     "chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"});
    cases.push_back({"garbage request line", "GARBAGE\r\n\r\n"});
    static const char kJunk[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n";
    cases.push_back({"binary junk", std::string(kJunk, sizeof(kJunk) - 1)});
    cases.push_back({"header too long", "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " +
                                            std::string(20000, 'h') + "\r\n\r\n"});
    cases.push_back({"URI too long",
                     "GET /" + std::string(10000, 'u') + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"});
    // Unknown routes and methods.
    cases.push_back({"unknown route", "GET /v2/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"});
    cases.push_back(
        {"path traversal", "GET /../../etc/passwd HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"});
    cases.push_back(
        {"GET a POST route", "GET /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"});
    cases.push_back({"PUT", post("/v1/models", "{}").replace(0, 4, "PUT")});
    cases.push_back(
        {"DELETE", "DELETE /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n"});
    cases.push_back({"POST to /health", post("/health", "{}")});
    cases.push_back({"detokenize garbage", post("/detokenize", json({{"tokens", {"a"}}}).dump())});
    cases.push_back({"detokenize out of range",
                     post("/detokenize", json({{"tokens", {-1, 99999999}}}).dump())});

    qInfo("%zu hostile requests", cases.size());
    QVERIFY(cases.size() >= 200);
    int checked = 0;
    for (const RawCase& c : cases) {
      auto conn = HttpConnection::connect(url_);
      LATHE_QVERIFY_RESULT(conn);
      // A server that stops reading early may reset the connection while we still send; the
      // response it wrote first is what counts.
      const Status sent = conn.value()->send_raw(c.bytes, 30000);
      Result<HttpClientResponse> r = conn.value()->read_response("POST", 30000);
      const std::string what =
          c.name + ": " +
          (r.is_ok() ? std::to_string(r.value().status) + " " + r.value().body.substr(0, 200)
                     : "no response (" + r.status().message() + ", send: " + sent.message() + ")");
      QVERIFY2(r.is_ok(), what.c_str());
      QVERIFY2(r.value().status >= 400 && r.value().status < 500, what.c_str());
      QVERIFY2(is_openai_error(r.value().body), what.c_str());
      ++checked;
    }
    QCOMPARE(checked, static_cast<int>(cases.size()));
    // Alive and correct afterwards: the same greedy answer as before, health, nothing left over.
    QCOMPARE(http_call(url_, "GET", "/health").status, 200);
    QCOMPARE(chat_answer(), answer_before);
    verify_idle();
  }

  void three_hundred_concurrent_streams() {
    constexpr int kRequests = 300;
    const double finished_before =
        prometheus_value(metrics(), "lathe:request_success_total", "finished_reason=\"length\"");
    std::atomic<bool> running{true};
    std::atomic<int64_t> peak_in_flight{0};
    std::vector<double> health_ms;
    const auto start = SteadyClock::now();
    std::vector<int> health_status;
    std::thread health([&] {
      while (running.load()) {
        const auto t0 = SteadyClock::now();
        const int status = http_call(url_, "GET", "/health", {}, {}, 5000).status;
        health_ms.push_back(ms_since(t0));
        if (health_ms.back() >= 50)
          qInfo("slow /health at %.0f ms: %.1f ms", ms_since(start), health_ms.back());
        health_status.push_back(status);
        peak_in_flight = std::max(peak_in_flight.load(), server_->stats().requests_in_flight);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
    std::vector<SseResponse> results(kRequests);
    std::vector<std::thread> clients;
    const auto t0 = SteadyClock::now();
    for (int i = 0; i < kRequests; ++i) {
      clients.emplace_back([&, i] {
        const int max_tokens = 4 + i % 5;
        json body;
        if (i % 10 == 0) {
          body = {{"messages",
                   {{{"role", "user"}, {"content", "Name a colour. " + std::to_string(i)}}}}};
        } else {
          body = {{"prompt", "Count: " + std::to_string(i)}};
        }
        body["max_tokens"] = max_tokens;
        body["ignore_eos"] = true;
        body["stream"] = true;
        body["stream_options"] = {{"include_usage", true}};
        results[static_cast<size_t>(i)] =
            sse_call(url_, i % 10 == 0 ? "/v1/chat/completions" : "/v1/completions", body.dump(),
                     {}, 600000);
      });
    }
    for (auto& t : clients) t.join();
    const double total_s = ms_since(t0) / 1000.0;
    running = false;
    health.join();

    for (int i = 0; i < kRequests; ++i) {
      const SseResponse& r = results[static_cast<size_t>(i)];
      const std::string what = "request " + std::to_string(i) + ": " + std::to_string(r.status) +
                               " " + r.error + (r.events.empty() ? "" : " " + r.events.front());
      QVERIFY2(r.status == 200, what.c_str());
      QVERIFY2(!r.events.empty() && r.events.back() == "[DONE]", what.c_str());
      const json usage = parse_json(r.events[r.events.size() - 2])["usage"];
      QVERIFY2(usage.is_object() && usage["completion_tokens"].get<int>() == 4 + i % 5,
               what.c_str());
      std::string finish;
      for (const std::string& e : r.events) {
        const json j = parse_json(e);
        if (!j.is_discarded() && j.is_object() && !j["choices"].empty() &&
            j["choices"][0]["finish_reason"].is_string())
          finish = j["choices"][0]["finish_reason"].get<std::string>();
      }
      QVERIFY2(finish == "length", what.c_str());
    }
    // Latency bounds scale with time_scale() (10 under the sanitizers, test_support.h).
    const double slow_ms = 100.0 * time_scale();
    std::vector<double> sorted = health_ms;
    std::sort(sorted.begin(), sorted.end());
    const double worst = sorted.empty() ? 0 : sorted.back();
    const double median = sorted.empty() ? 0 : sorted[sorted.size() / 2];
    const long over =
        std::count_if(sorted.begin(), sorted.end(), [&](double ms) { return ms >= slow_ms; });
    qInfo(
        "300 streams done in %.1f s; /health answered %zu times: median %.1f ms, slowest %.1f ms, "
        "%ld at or over %.0f ms; peak requests in flight %lld",
        total_s, health_ms.size(), median, worst, over, slow_ms,
        static_cast<long long>(peak_in_flight.load()));
    QVERIFY(health_ms.size() >= 10);
    for (size_t i = 0; i < health_ms.size(); ++i) QCOMPARE(health_status[i], 200);
    // /health must never wait for an engine step. A 2-core CI machine running 300 client threads
    // next to another test can still deschedule the probe once for ~100 ms (seen: one 113 ms
    // answer of 568 while the 300 threads were being created), so the contract is stated as
    // what a health check behind the step loop could not meet: a median under 10 ms, at most
    // 2% of answers at or over 100 ms, and none over a second.
    const std::string summary = "median " + std::to_string(median) + " ms, slowest " +
                                std::to_string(worst) + " ms, " + std::to_string(over) + " of " +
                                std::to_string(sorted.size()) + " at or over " +
                                std::to_string(slow_ms) + " ms";
    QVERIFY2(median < 10.0 * time_scale(), summary.c_str());
    QVERIFY2(static_cast<double>(over) <= 0.02 * static_cast<double>(sorted.size()),
             summary.c_str());
    QVERIFY2(worst < 1000.0 * time_scale(), summary.c_str());
    QVERIFY2(peak_in_flight.load() >= 250, std::to_string(peak_in_flight.load()).c_str());
    QCOMPARE(
        prometheus_value(metrics(), "lathe:request_success_total", "finished_reason=\"length\""),
        finished_before + kRequests);
    verify_idle();
  }
};

QTEST_GUILESS_MAIN(ServerEngineTest)
#include "server_engine_test.moc"
