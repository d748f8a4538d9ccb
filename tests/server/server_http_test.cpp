// The HTTP layer against a fake engine (fake_engine.h): OpenAI response shapes, streaming,
// parameter checks, error statuses, authentication, limits, disconnects and graceful stop.
#include <QtTest>

#include <atomic>
#include <memory>
#include <thread>

#include "engine/core/strings.h"
#include "engine/server/api_server.h"
#include "engine/server/openai_request.h"
#include "fake_server_fixture.h"
#include "server_test_util.h"
#include "test_support.h"

using namespace lathe;
using namespace lathe::test;

namespace {

std::string error_param(const std::string& body) {
  const json j = parse_json(body);
  if (j.is_discarded() || !j.contains("error") || !j["error"]["param"].is_string()) return "";
  return j["error"]["param"].get<std::string>();
}

// Concatenated text of a streamed response, and the finish reason of its last choice.
struct StreamSummary {
  std::string text;
  std::string finish_reason;
  bool done = false;
  json usage;
  int chunks_with_choices = 0;
};

StreamSummary summarize(const SseResponse& r, bool chat) {
  StreamSummary s;
  for (const std::string& e : r.events) {
    if (e == "[DONE]") {
      s.done = true;
      continue;
    }
    const json j = parse_json(e);
    if (j.is_discarded()) continue;
    if (j.contains("usage") && j["usage"].is_object()) s.usage = j["usage"];
    if (!j.contains("choices") || j["choices"].empty()) continue;
    ++s.chunks_with_choices;
    const json& c = j["choices"][0];
    if (chat) {
      if (c["delta"].contains("content")) s.text += c["delta"]["content"].get<std::string>();
    } else {
      s.text += c["text"].get<std::string>();
    }
    if (c["finish_reason"].is_string()) s.finish_reason = c["finish_reason"].get<std::string>();
  }
  return s;
}

}  // namespace

class ServerHttpTest : public QObject, private FakeServerFixture {
  Q_OBJECT

 private slots:
  void initTestCase() { start_fake_server(); }
  void cleanupTestCase() { stop_fake_server(); }

  void health_models_and_unknown_routes() {
    HttpClientResponse h = http_call(url_, "GET", "/health");
    QCOMPARE(h.status, 200);
    HttpClientResponse m = http_call(url_, "GET", "/v1/models");
    QCOMPARE(m.status, 200);
    const json models = parse_json(m.body);
    QCOMPARE(models["object"].get<std::string>(), std::string("list"));
    QCOMPARE(models["data"][0]["id"].get<std::string>(), std::string("fake-model"));
    QCOMPARE(models["data"][0]["max_model_len"].get<int>(), 256);
    QCOMPARE(models["data"][0]["vocab_size"].get<int>(), 258);

    QCOMPARE(
        parse_json(http_call(url_, "GET", "/v1/models/fake-model").body)["id"].get<std::string>(),
        std::string("fake-model"));
    QCOMPARE(http_call(url_, "GET", "/v1/models/other-model").status, 404);
    HttpClientResponse nf = http_call(url_, "GET", "/v1/nothing");
    QCOMPARE(nf.status, 404);
    QVERIFY2(is_openai_error(nf.body), nf.body.c_str());
    HttpClientResponse wrong_method = http_call(url_, "GET", "/v1/completions");
    QCOMPARE(wrong_method.status, 405);
    QVERIFY(is_openai_error(wrong_method.body));
    HttpClientResponse metrics = http_call(url_, "GET", "/metrics");
    QCOMPARE(metrics.status, 200);
    QVERIFY(metrics.body.find("lathe:num_requests_running") != std::string::npos);
    QVERIFY(metrics.body.find("lathe:http_generation_requests_total") != std::string::npos);
  }

  void chat_completion_has_openai_shape() {
    const json body = {{"model", "fake-model"},
                       {"messages",
                        {{{"role", "system"}, {"content", "be brief"}},
                         {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "hi"}}}}}}},
                       {"max_tokens", 5}};
    HttpClientResponse r = http_call(url_, "POST", "/v1/chat/completions", body.dump());
    QCOMPARE(r.status, 200);
    const json j = parse_json(r.body);
    QVERIFY(starts_with(j["id"].get<std::string>(), "chatcmpl-"));
    QCOMPARE(j["object"].get<std::string>(), std::string("chat.completion"));
    QCOMPARE(j["model"].get<std::string>(), std::string("fake-model"));
    QVERIFY(j["created"].is_number_integer());
    QCOMPARE(j["choices"][0]["message"]["role"].get<std::string>(), std::string("assistant"));
    QCOMPARE(j["choices"][0]["message"]["content"].get<std::string>(), std::string("abcde"));
    QCOMPARE(j["choices"][0]["finish_reason"].get<std::string>(), std::string("length"));
    QCOMPARE(j["usage"]["completion_tokens"].get<int>(), 5);
    // The fake template renders "role: content\n" lines after BOS, plus the assistant header.
    const int prompt =
        1 + static_cast<int>(std::string("system: be brief\nuser: hi\nassistant: ").size());
    QCOMPARE(j["usage"]["prompt_tokens"].get<int>(), prompt);
    QCOMPARE(j["usage"]["total_tokens"].get<int>(), prompt + 5);
    // The engine got the tokenized prompt and the cap.
    QCOMPARE(static_cast<int>(engine_->last_spec().prompt_tokens.size()), prompt);
    QCOMPARE(engine_->last_spec().sampling.max_tokens, 5);
  }

  void chat_without_max_tokens_runs_to_the_context_end() {
    const json body = {{"messages", {{{"role", "user"}, {"content", "x"}}}}};
    HttpClientResponse r = http_call(url_, "POST", "/v1/chat/completions", body.dump());
    QCOMPARE(r.status, 200);
    const json j = parse_json(r.body);
    const int prompt = j["usage"]["prompt_tokens"].get<int>();
    QCOMPARE(j["usage"]["completion_tokens"].get<int>(), 256 - prompt);
    QCOMPARE(j["choices"][0]["finish_reason"].get<std::string>(), std::string("length"));
  }

  void completion_stream_ends_with_usage_and_done() {
    const json body = {{"prompt", "hello"},
                       {"max_tokens", 7},
                       {"stream", true},
                       {"stream_options", {{"include_usage", true}}}};
    SseResponse r = sse_call(url_, "/v1/completions", body.dump());
    QCOMPARE(r.status, 200);
    QVERIFY(r.events.size() >= 3);
    QCOMPARE(r.events.back(), std::string("[DONE]"));
    const json last = parse_json(r.events[r.events.size() - 2]);
    QVERIFY(last["choices"].is_array() && last["choices"].empty());
    QCOMPARE(last["usage"]["completion_tokens"].get<int>(), 7);
    QCOMPARE(last["usage"]["prompt_tokens"].get<int>(), 6);
    const StreamSummary s = summarize(r, false);
    QCOMPARE(s.text, std::string("abcdefg"));
    QCOMPARE(s.finish_reason, std::string("length"));
    // One chunk per token: the finish reason rides on the last token's chunk.
    QCOMPARE(s.chunks_with_choices, 7);
    std::string id;
    for (size_t i = 0; i + 1 < r.events.size(); ++i) {
      const json j = parse_json(r.events[i]);
      QCOMPARE(j["object"].get<std::string>(), std::string("text_completion"));
      QVERIFY(j.contains("usage"));  // null on content chunks when include_usage is on
      if (id.empty()) id = j["id"].get<std::string>();
      QCOMPARE(j["id"].get<std::string>(), id);
    }
  }

  void chat_stream_carries_role_then_content() {
    const json body = {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                       {"max_completion_tokens", 3},
                       {"stream", true}};
    SseResponse r = sse_call(url_, "/v1/chat/completions", body.dump());
    QCOMPARE(r.status, 200);
    const json first = parse_json(r.events.front());
    QCOMPARE(first["object"].get<std::string>(), std::string("chat.completion.chunk"));
    QCOMPARE(first["choices"][0]["delta"]["role"].get<std::string>(), std::string("assistant"));
    QVERIFY(!first.contains("usage"));  // only with stream_options.include_usage
    const StreamSummary s = summarize(r, true);
    QCOMPARE(s.text, std::string("abc"));
    QCOMPARE(s.finish_reason, std::string("length"));
    QVERIFY(s.done);
  }

  // n > 1: n engine requests of the one prompt, seeds seed + i, one choice each (index i), usage
  // with the prompt once and the completions summed; streamed chunks carry their index.
  void n_choices_come_back_indexed() {
    const int64_t before = engine_->num_submitted();
    const json body = {{"prompt", "hello"},
                       {"max_tokens", 3},
                       {"n", 3},
                       {"seed", 7},
                       {"logit_bias", {{"5", -100}, {"6", 2.5}}},
                       {"logprobs", 1}};
    const json j = parse_json(http_call(url_, "POST", "/v1/completions", body.dump()).body);
    QCOMPARE(engine_->num_submitted(), before + 3);
    QCOMPARE(engine_->last_spec().sampling.seed.value(), uint64_t{9});
    const std::vector<TokenBias> bias = engine_->last_spec().sampling.logit_bias;
    QCOMPARE(static_cast<int>(bias.size()), 2);
    QVERIFY((bias[0] == TokenBias{5, -100.f}) && (bias[1] == TokenBias{6, 2.5f}));
    QCOMPARE(static_cast<int>(j["choices"].size()), 3);
    for (int i = 0; i < 3; ++i) {
      QCOMPARE(j["choices"][i]["index"].get<int>(), i);
      QCOMPARE(j["choices"][i]["text"].get<std::string>(), std::string("abc"));
      QCOMPARE(static_cast<int>(j["choices"][i]["logprobs"]["tokens"].size()), 3);
    }
    QCOMPARE(j["usage"]["prompt_tokens"].get<int>(), 6);
    QCOMPARE(j["usage"]["completion_tokens"].get<int>(), 9);

    const json chat = {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                       {"max_tokens", 4},
                       {"n", 2},
                       {"stream", true},
                       {"stream_options", {{"include_usage", true}}}};
    SseResponse r = sse_call(url_, "/v1/chat/completions", chat.dump());
    QCOMPARE(r.status, 200);
    QCOMPARE(r.events.back(), std::string("[DONE]"));
    std::string text[2];
    int roles[2] = {0, 0}, finishes[2] = {0, 0};
    for (size_t e = 0; e + 2 < r.events.size(); ++e) {
      const json c = parse_json(r.events[e]);
      QCOMPARE(static_cast<int>(c["choices"].size()), 1);
      const json& ch = c["choices"][0];
      const int i = ch["index"].get<int>();
      QVERIFY(i == 0 || i == 1);
      if (ch["delta"].contains("role")) ++roles[i];
      if (ch["delta"].contains("content")) text[i] += ch["delta"]["content"].get<std::string>();
      if (!ch["finish_reason"].is_null()) ++finishes[i];
    }
    for (int i = 0; i < 2; ++i) {
      QCOMPARE(text[i], std::string("abcd"));
      QCOMPARE(roles[i], 1);
      QCOMPARE(finishes[i], 1);
    }
    QCOMPARE(parse_json(r.events[r.events.size() - 2])["usage"]["completion_tokens"].get<int>(), 8);
  }

  void logprobs_in_openai_shapes() {
    const json chat = {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                       {"max_tokens", 2},
                       {"logprobs", true},
                       {"top_logprobs", 2}};
    const json j = parse_json(http_call(url_, "POST", "/v1/chat/completions", chat.dump()).body);
    const json& content = j["choices"][0]["logprobs"]["content"];
    QCOMPARE(static_cast<int>(content.size()), 2);
    QCOMPARE(content[1]["token"].get<std::string>(), std::string("b"));
    QCOMPARE(content[1]["bytes"][0].get<int>(), static_cast<int>('b'));
    QCOMPARE(content[1]["logprob"].get<double>(), -0.5);
    QCOMPARE(static_cast<int>(content[1]["top_logprobs"].size()), 2);
    QCOMPARE(content[1]["top_logprobs"][1]["token"].get<std::string>(), std::string("b"));

    const json comp = {{"prompt", "x"}, {"max_tokens", 3}, {"logprobs", 1}};
    const json c = parse_json(http_call(url_, "POST", "/v1/completions", comp.dump()).body);
    const json& lp = c["choices"][0]["logprobs"];
    QCOMPARE(lp["tokens"], json({"a", "b", "c"}));
    QCOMPARE(lp["text_offset"], json({0, 1, 2}));
    QCOMPARE(static_cast<int>(lp["token_logprobs"].size()), 3);
    QVERIFY(lp["top_logprobs"][0].contains("a"));
    // Without logprobs: null.
    const json plain =
        parse_json(http_call(url_, "POST", "/v1/completions", json({{"prompt", "x"}}).dump()).body);
    QVERIFY(plain["choices"][0]["logprobs"].is_null());
    QCOMPARE(plain["usage"]["completion_tokens"].get<int>(), 16);  // OpenAI's default max_tokens
  }

  void stop_strings_end_with_stop() {
    const json body = {{"prompt", "x"}, {"max_tokens", 20}, {"stop", {"zz", "def"}}};
    const json j = parse_json(http_call(url_, "POST", "/v1/completions", body.dump()).body);
    QCOMPARE(j["choices"][0]["finish_reason"].get<std::string>(), std::string("stop"));
    QCOMPARE(j["choices"][0]["stop_reason"].get<std::string>(), std::string("def"));
    QCOMPARE(engine_->last_spec().sampling.stop, std::vector<std::string>({"zz", "def"}));
  }

  void sampling_parameters_reach_the_engine() {
    const json body = {{"prompt", {1, 2, 3}},
                       {"max_tokens", 2},
                       {"temperature", 0.5},
                       {"top_p", 0.9},
                       {"top_k", 40},
                       {"min_p", 0.05},
                       {"seed", 42},
                       {"presence_penalty", 0.5},
                       {"frequency_penalty", -0.5},
                       {"repetition_penalty", 1.1},
                       {"ignore_eos", true},
                       {"user", "someone"},
                       {"n", 1}};
    HttpClientResponse r = http_call(url_, "POST", "/v1/completions", body.dump());
    QCOMPARE(r.status, 200);
    const RequestSpec spec = engine_->last_spec();
    QCOMPARE(spec.prompt_tokens, std::vector<TokenId>({1, 2, 3}));
    QCOMPARE(spec.sampling.temperature, 0.5f);
    QCOMPARE(spec.sampling.top_p, 0.9f);
    QCOMPARE(spec.sampling.top_k, 40);
    QCOMPARE(spec.sampling.min_p, 0.05f);
    QCOMPARE(spec.sampling.seed.value(), uint64_t{42});
    QCOMPARE(spec.sampling.presence_penalty, 0.5f);
    QCOMPARE(spec.sampling.frequency_penalty, -0.5f);
    QCOMPARE(spec.sampling.repetition_penalty, 1.1f);
    QVERIFY(spec.sampling.ignore_eos);
    QCOMPARE(parse_json(r.body)["usage"]["prompt_tokens"].get<int>(), 3);
  }

  void invalid_parameters_get_400_naming_the_field() {
    struct Case {
      const char* path;
      json body;
      const char* param;
    };
    const json msgs = {{{"role", "user"}, {"content", "hi"}}};
    const std::vector<Case> cases = {
        {"/v1/chat/completions", {{"messages", msgs}, {"n", 17}}, "n"},
        {"/v1/chat/completions", {{"messages", msgs}, {"n", 0}}, "n"},
        {"/v1/completions", {{"prompt", "x"}, {"n", 2}, {"best_of", 3}}, "best_of"},
        {"/v1/completions", {{"prompt", "x"}, {"logit_bias", {{"abc", 1}}}}, "logit_bias"},
        {"/v1/completions", {{"prompt", "x"}, {"logit_bias", {{"5", -101}}}}, "logit_bias"},
        {"/v1/completions", {{"prompt", "x"}, {"logit_bias", {{"5", "1"}}}}, "logit_bias"},
        {"/v1/completions", {{"prompt", "x"}, {"logit_bias", {{"5", 1}, {"05", 2}}}}, "logit_bias"},
        {"/v1/completions", {{"prompt", "x"}, {"logit_bias", {{"300", 1}}}}, "logit_bias"},
        {"/v1/completions", {{"prompt", "x"}, {"logit_bias", {1, 2}}}, "logit_bias"},
        {"/v1/chat/completions", {{"messages", msgs}, {"temperature", 3}}, "temperature"},
        {"/v1/chat/completions", {{"messages", msgs}, {"temperature", "hot"}}, "temperature"},
        {"/v1/chat/completions", {{"messages", msgs}, {"top_p", 0}}, "top_p"},
        {"/v1/chat/completions", {{"messages", msgs}, {"max_tokens", -1}}, "max_tokens"},
        {"/v1/chat/completions", {{"messages", msgs}, {"max_tokens", 1.5}}, "max_tokens"},
        {"/v1/chat/completions", {{"messages", msgs}, {"top_logprobs", 3}}, "top_logprobs"},
        {"/v1/chat/completions",
         {{"messages", msgs}, {"logprobs", true}, {"top_logprobs", 21}},
         "top_logprobs"},
        {"/v1/chat/completions",
         {{"messages", msgs}, {"stream_options", {{"include_usage", true}}}},
         "stream_options"},
        {"/v1/chat/completions",
         {{"messages", msgs}, {"tools", {{{"type", "function"}}}}},
         "tools"},
        {"/v1/chat/completions", {{"messages", msgs}, {"frobnicate", 1}}, "frobnicate"},
        {"/v1/chat/completions", {{"messages", json::array()}}, "messages"},
        {"/v1/chat/completions",
         {{"messages", {{{"role", "wizard"}, {"content", "x"}}}}},
         "messages"},
        {"/v1/chat/completions",
         {{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}}}}}}}},
         "messages"},
        {"/v1/chat/completions", {{"prompt", "x"}}, "prompt"},
        {"/v1/completions", {{"prompt", {"a", "b"}}}, "prompt"},
        {"/v1/completions", {{"prompt", {1, 999999}}}, "prompt"},
        {"/v1/completions", {{"prompt", {1, -2}}}, "prompt"},
        {"/v1/completions", {{"prompt", 5}}, "prompt"},
        {"/v1/completions", {{"prompt", "x"}, {"echo", 1}}, "echo"},
        {"/v1/completions", {{"prompt", "x"}, {"logprobs", true}}, "logprobs"},
        {"/v1/completions", {{"prompt", "x"}, {"stop", {1}}}, "stop"},
        {"/v1/completions", {{"prompt", "x"}, {"stop_token_ids", {300}}}, "stop_token_ids"},
        {"/v1/completions", {{"prompt", "x"}, {"seed", "abc"}}, "seed"},
        {"/v1/completions", {{"prompt", "x"}, {"best_of", 3}}, "best_of"},
        {"/v1/completions", {{"prompt", "x"}, {"max_tokens", 1e30}}, "max_tokens"},
        {"/v1/completions",
         {{"prompt", "x"}, {"max_tokens", 300}},
         "max_tokens"},  // > max-model-len
        {"/v1/completions", {{"max_tokens", 3}}, "prompt"},
    };
    for (const Case& c : cases) {
      HttpClientResponse r = http_call(url_, "POST", c.path, c.body.dump());
      const std::string what = c.body.dump() + " -> " + std::to_string(r.status) + " " + r.body;
      QVERIFY2(r.status == 400, what.c_str());
      QVERIFY2(is_openai_error(r.body), what.c_str());
      QVERIFY2(error_param(r.body) == c.param, what.c_str());
    }
  }

  void prompt_forms_and_context_overflow() {
    // A list holding one prompt is that prompt.
    HttpClientResponse one = http_call(url_, "POST", "/v1/completions",
                                       json({{"prompt", {"hey"}}, {"max_tokens", 1}}).dump());
    QCOMPARE(one.status, 200);
    HttpClientResponse ids = http_call(url_, "POST", "/v1/completions",
                                       json({{"prompt", {{5, 6}}}, {"max_tokens", 1}}).dump());
    QCOMPARE(ids.status, 200);
    QCOMPARE(parse_json(ids.body)["usage"]["prompt_tokens"].get<int>(), 2);
    // prompt + max_tokens over max-model-len (256) names both numbers.
    const json over = {{"prompt", std::string(200, 'x')}, {"max_tokens", 100}};
    HttpClientResponse r = http_call(url_, "POST", "/v1/completions", over.dump());
    QCOMPARE(r.status, 400);
    QVERIFY2(r.body.find("maximum context length is 256") != std::string::npos, r.body.c_str());
    QVERIFY2(r.body.find("301") != std::string::npos, r.body.c_str());  // 1 BOS + 200 + 100
    // A prompt that alone fills the context.
    HttpClientResponse full = http_call(url_, "POST", "/v1/completions",
                                        json({{"prompt", std::string(300, 'x')}}).dump());
    QCOMPARE(full.status, 400);
  }

  void unknown_model_is_404() {
    const json body = {{"model", "gpt-4"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
    HttpClientResponse r = http_call(url_, "POST", "/v1/chat/completions", body.dump());
    QCOMPARE(r.status, 404);
    QVERIFY(is_openai_error(r.body));
    QCOMPARE(parse_json(r.body)["error"]["code"].get<std::string>(),
             std::string("model_not_found"));
  }

  void tokenize_and_detokenize() {
    HttpClientResponse t = http_call(url_, "POST", "/tokenize", json({{"prompt", "ab"}}).dump());
    QCOMPARE(t.status, 200);
    const json tj = parse_json(t.body);
    QCOMPARE(tj["tokens"], json({256, 97, 98}));
    QCOMPARE(tj["count"].get<int>(), 3);
    QCOMPARE(tj["max_model_len"].get<int>(), 256);
    HttpClientResponse nt = http_call(
        url_, "POST", "/tokenize", json({{"prompt", "ab"}, {"add_special_tokens", false}}).dump());
    QCOMPARE(parse_json(nt.body)["tokens"], json({97, 98}));
    HttpClientResponse d =
        http_call(url_, "POST", "/detokenize", json({{"tokens", {104, 105}}}).dump());
    QCOMPARE(d.status, 200);
    QCOMPARE(parse_json(d.body)["prompt"].get<std::string>(), std::string("hi"));
    HttpClientResponse bad =
        http_call(url_, "POST", "/detokenize", json({{"tokens", {104, 9999}}}).dump());
    QCOMPARE(bad.status, 400);
    QVERIFY(is_openai_error(bad.body));
  }

  // GET /tokenizer_info (vLLM's; lm-eval's remote tokenizer): the special tokens as text and ids,
  // what /tokenize adds, the limits; no chat template key when the model has none. The key
  // (api_key_required) and a model without a tokenizer (test_bench_serve) are checked elsewhere.
  void tokenizer_info() {
    HttpClientResponse r = http_call(url_, "GET", "/tokenizer_info");
    QCOMPARE(r.status, 200);
    const json j = parse_json(r.body);
    QCOMPARE(j["eos_token"].get<std::string>(), std::string("</s>"));
    QCOMPARE(j["eos_token_id"].get<int>(), 257);
    QCOMPARE(j["bos_token"].get<std::string>(), std::string("<s>"));
    QCOMPARE(j["bos_token_id"].get<int>(), 256);
    QCOMPARE(j["add_bos_token"].get<bool>(), true);
    QCOMPARE(j["add_eos_token"].get<bool>(), false);
    QCOMPARE(j["vocab_size"].get<int>(), 258);
    QCOMPARE(j["model_max_length"].get<int>(), 256);
    QCOMPARE(j["tokenizer_kind"].get<std::string>(), std::string("bpe"));
    QVERIFY2(!j.contains("chat_template"), r.body.c_str());
    HttpClientResponse post = http_call(url_, "POST", "/tokenizer_info", "{}");
    QCOMPARE(post.status, 405);
    QVERIFY(is_openai_error(post.body));
  }

  void body_limits_and_framing() {
    ServerConfig config;
    config.max_body_bytes = 1024;
    config.read_timeout_ms = 500;
    std::unique_ptr<ApiServer> small = start_server(*engine_, config);
    const Url url = local_url(small->port());
    HttpClientResponse big = http_call(url, "POST", "/v1/completions",
                                       json({{"prompt", std::string(5000, 'x')}}).dump());
    QCOMPARE(big.status, 413);
    QVERIFY(is_openai_error(big.body));
    // No Content-Length: 411, at once.
    auto conn = HttpConnection::connect(url);
    LATHE_QVERIFY_RESULT(conn);
    LATHE_QVERIFY_OK(
        conn.value()->send_raw("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
    Result<HttpClientResponse> r = conn.value()->read_response("POST", 5000);
    LATHE_QVERIFY_RESULT(r);
    QCOMPARE(r.value().status, 411);
    QVERIFY(is_openai_error(r.value().body));
    // Not HTTP at all.
    conn = HttpConnection::connect(url);
    LATHE_QVERIFY_OK(conn.value()->send_raw("\x16\x03\x01 hello garbage\r\n\r\n"));
    r = conn.value()->read_response("GET", 5000);
    LATHE_QVERIFY_RESULT(r);
    QCOMPARE(r.value().status, 400);
    QVERIFY(is_openai_error(r.value().body));
    // The body announced but never sent: 400 after the read timeout (500 ms here), not a hang.
    conn = HttpConnection::connect(url);
    LATHE_QVERIFY_OK(conn.value()->send_raw(
        "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 50\r\n\r\n{\"pro"));
    const auto t0 = std::chrono::steady_clock::now();
    r = conn.value()->read_response("POST", 5000);
    LATHE_QVERIFY_RESULT(r);
    QCOMPARE(r.value().status, 400);
    QVERIFY(is_openai_error(r.value().body));
    QVERIFY(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(3));
    // A chunked body over the limit.
    conn = HttpConnection::connect(url);
    std::string chunked =
        "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (int i = 0; i < 4; ++i) chunked += "200\r\n" + std::string(512, ' ') + "\r\n";
    chunked += "0\r\n\r\n";
    LATHE_QVERIFY_OK(conn.value()->send_raw(chunked));
    r = conn.value()->read_response("POST", 5000);
    LATHE_QVERIFY_RESULT(r);
    QCOMPARE(r.value().status, 413);
    small->stop(std::chrono::milliseconds(0));
  }

  void api_key_required() {
    ServerConfig config;
    config.api_key = "sekrit";
    std::unique_ptr<ApiServer> keyed = start_server(*engine_, config);
    const Url url = local_url(keyed->port());
    const std::string body = json({{"prompt", "x"}, {"max_tokens", 1}}).dump();
    HttpClientResponse none = http_call(url, "POST", "/v1/completions", body);
    QCOMPARE(none.status, 401);
    QVERIFY(is_openai_error(none.body));
    HttpClientResponse wrong =
        http_call(url, "POST", "/v1/completions", body, {{"Authorization", "Bearer nope"}});
    QCOMPARE(wrong.status, 401);
    QCOMPARE(http_call(url, "GET", "/v1/models", {}, {{"Authorization", "Bearer sekri"}}).status,
             401);
    QCOMPARE(http_call(url, "GET", "/tokenizer_info").status, 401);
    QCOMPARE(
        http_call(url, "GET", "/tokenizer_info", {}, {{"Authorization", "Bearer sekrit"}}).status,
        200);
    HttpClientResponse right =
        http_call(url, "POST", "/v1/completions", body, {{"Authorization", "Bearer sekrit"}});
    QCOMPARE(right.status, 200);
    QCOMPARE(http_call(url, "GET", "/health").status, 200);   // probes need no key
    QCOMPARE(http_call(url, "GET", "/metrics").status, 200);  // nor scrapers
    keyed->stop(std::chrono::milliseconds(0));
  }

  void full_queue_gets_503_with_retry_after() {
    FakeEngine::Options o;
    o.max_waiting = 1;
    FakeEngine busy(o);
    busy.pause(true);
    std::unique_ptr<ApiServer> s = start_server(busy);
    const Url url = local_url(s->port());
    std::thread first([&] {
      http_call(url, "POST", "/v1/completions", json({{"prompt", "x"}, {"max_tokens", 2}}).dump());
    });
    QTRY_COMPARE_WITH_TIMEOUT(busy.num_unfinished_requests(), 1, 5000);
    HttpClientResponse r = http_call(url, "POST", "/v1/completions",
                                     json({{"prompt", "y"}, {"max_tokens", 2}}).dump());
    QCOMPARE(r.status, 503);
    QVERIFY(is_openai_error(r.body));
    QCOMPARE(r.header("Retry-After"), std::string("1"));
    busy.pause(false);
    first.join();
    s->stop(std::chrono::milliseconds(0));
  }

  void client_disconnect_aborts_request() {
    engine_->pause(true);
    const int64_t aborted_before = engine_->num_aborted();
    {
      auto conn = HttpConnection::connect(url_);
      LATHE_QVERIFY_RESULT(conn);
      HttpClientRequest req;
      req.method = "POST";
      req.path = "/v1/completions";
      req.body = json({{"prompt", "x"}, {"max_tokens", 200}, {"stream", true}}).dump();
      std::atomic<bool> got_headers{false};
      std::thread reader([&] {
        Result<HttpClientResponse> res =
            conn.value()->request(req, [&](std::string_view) { return false; });
        got_headers = res.is_ok() && res.value().status == 200;
      });
      QTRY_COMPARE_WITH_TIMEOUT(engine_->num_unfinished_requests(), 1, 5000);
      engine_->pause(false);  // tokens flow; the reader stops at the first one and closes
      reader.join();
      QVERIFY(got_headers.load());
    }
    QTRY_COMPARE_WITH_TIMEOUT(engine_->num_unfinished_requests(), 0, 3000);
    QCOMPARE(engine_->num_aborted(), aborted_before + 1);
    QTRY_COMPARE_WITH_TIMEOUT(server_->stats().requests_in_flight, int64_t{0}, 3000);
    const std::string metrics = http_call(url_, "GET", "/metrics").body;
    QCOMPARE(prometheus_value(metrics, "lathe:kv_cache_blocks", "state=\"used\""), 0.0);
    QVERIFY(prometheus_value(metrics, "lathe:http_client_disconnects_total") >= 1.0);

    // A non-streaming client that gives up is noticed too.
    engine_->pause(true);
    const int64_t before = engine_->num_aborted();
    {
      auto conn = HttpConnection::connect(url_);
      const std::string body = json({{"prompt", "x"}, {"max_tokens", 50}}).dump();
      LATHE_QVERIFY_OK(conn.value()->send_raw(
          "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " +
          std::to_string(body.size()) + "\r\n\r\n" + body));
      QTRY_COMPARE_WITH_TIMEOUT(engine_->num_unfinished_requests(), 1, 5000);
    }  // closed here
    QTRY_COMPARE_WITH_TIMEOUT(engine_->num_unfinished_requests(), 0, 3000);
    QCOMPARE(engine_->num_aborted(), before + 1);
    engine_->pause(false);
  }

  void request_log_reports_each_request() {
    std::mutex m;
    std::vector<RequestLogEntry> entries;
    server_->set_request_log_callback([&](const RequestLogEntry& e) {
      std::lock_guard<std::mutex> lock(m);
      entries.push_back(e);
    });
    http_call(url_, "POST", "/v1/completions", json({{"prompt", "x"}, {"max_tokens", 4}}).dump());
    http_call(url_, "POST", "/v1/completions", json({{"prompt", "x"}, {"n", 30}}).dump());
    server_->set_request_log_callback(nullptr);
    std::lock_guard<std::mutex> lock(m);
    QCOMPARE(static_cast<int>(entries.size()), 2);
    QVERIFY(starts_with(entries[0].id, "cmpl-"));
    QCOMPARE(entries[0].http_status, 200);
    QCOMPARE(entries[0].completion_tokens, 4);
    QCOMPARE(entries[0].prompt_tokens, 2);
    QCOMPARE(entries[0].finish_reason, std::string("length"));
    QVERIFY(entries[0].ttft_ms >= 0);
    QVERIFY(entries[0].tokens_per_s > 0);
    QCOMPARE(entries[1].http_status, 400);
    QVERIFY(entries[1].error.find("n must be in [1, 16]") != std::string::npos);
    const std::string line = format_request_log_line(entries[0]);
    QVERIFY2(line.find("prompt=2 generated=4") != std::string::npos &&
                 line.find("finish=length") != std::string::npos,
             line.c_str());
  }

  void graceful_stop_finishes_then_aborts() {
    FakeEngine::Options o;
    o.tick = std::chrono::milliseconds(20);
    FakeEngine slow(o);
    std::unique_ptr<ApiServer> s = start_server(slow);
    const Url url = local_url(s->port());
    // A short request finishes within the grace; a long one is aborted at its end.
    SseResponse short_r, long_r;
    std::thread a([&] {
      short_r = sse_call(url, "/v1/completions",
                         json({{"prompt", "x"}, {"max_tokens", 5}, {"stream", true}}).dump());
    });
    std::thread b([&] {
      long_r = sse_call(url, "/v1/completions",
                        json({{"prompt", "x"}, {"max_tokens", 250}, {"stream", true}}).dump());
    });
    QTRY_COMPARE_WITH_TIMEOUT(slow.num_unfinished_requests(), 2, 5000);
    const auto t0 = std::chrono::steady_clock::now();
    s->stop(std::chrono::milliseconds(500));
    const double stop_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    a.join();
    b.join();
    QVERIFY2(stop_s < 3.0, std::to_string(stop_s).c_str());
    QCOMPARE(summarize(short_r, false).finish_reason, std::string("length"));
    const StreamSummary l = summarize(long_r, false);
    QCOMPARE(l.finish_reason, std::string("abort"));
    QVERIFY(l.done);
    QCOMPARE(slow.num_unfinished_requests(), 0);
    // Stopped: nothing listens any more.
    QCOMPARE(http_call(url, "GET", "/health", {}, {}, 2000).status, -1);
  }
  // Every cap is a 4xx with an OpenAI error naming the field, never work done.
  void request_caps_are_4xx() {
    const json msgs = {{{"role", "user"}, {"content", "hi"}}};
    json many_stops = json::array();
    for (int i = 0; i < 17; ++i) many_stops.push_back(strformat("s%d", i));
    struct Case {
      std::string path;
      json body;
      std::string param;
    };
    const std::vector<Case> cases = {
        {"/v1/completions",
         {{"prompt", std::string(300, 'x')}, {"max_tokens", 1}},
         ""},  // > max-model-len
        {"/v1/completions", {{"prompt", "x"}, {"max_tokens", 257}}, "max_tokens"},
        {"/v1/completions", {{"prompt", "x"}, {"max_tokens", 2147483648ll}}, "max_tokens"},
        {"/v1/completions", {{"prompt", "x"}, {"stop", many_stops}}, "stop"},
        {"/v1/completions", {{"prompt", "x"}, {"stop", std::string(1025, 's')}}, "stop"},
        {"/v1/chat/completions", {{"messages", msgs}, {"n", kMaxChoices + 1}}, "n"},
        {"/v1/chat/completions", {{"messages", msgs}, {"n", 1000000}}, "n"},
    };
    for (const Case& c : cases) {
      const HttpClientResponse r = http_call(url_, "POST", c.path, c.body.dump());
      QVERIFY2(r.status >= 400 && r.status < 500,
               (c.body.dump().substr(0, 80) + " -> " + std::to_string(r.status)).c_str());
      QVERIFY(is_openai_error(r.body));
      if (!c.param.empty()) QCOMPARE(error_param(r.body), c.param);
    }
  }
};

QTEST_GUILESS_MAIN(ServerHttpTest)
#include "server_http_test.moc"
