// `lathe bench serve`'s parts: vLLM's metric definitions on hand-made data, the SSE parser, the
// datasets, URL parsing, and the load generator against an in-process server on a fake engine
// whose timing is known.
#include <QtTest>

#include <cmath>
#include <fstream>

#include "engine/bench/load_generator.h"
#include "engine/bench/serve_bench_dataset.h"
#include "engine/bench/serve_bench_metrics.h"
#include "engine/bench/sse_parser.h"
#include "engine/server/api_server.h"
#include "fake_engine.h"
#include "server_test_util.h"
#include "test_support.h"

using namespace lathe;
using namespace lathe::test;

class ServeBenchTest : public QObject {
  Q_OBJECT

 private slots:
  void percentiles_match_numpy() {
    // numpy.percentile([1, 2, 3, 4], q) with the default linear interpolation.
    const std::vector<double> v = {4, 1, 3, 2};
    QCOMPARE(percentile(v, 50), 2.5);
    QVERIFY(std::fabs(percentile(v, 90) - 3.7) < 1e-12);
    QVERIFY(std::fabs(percentile(v, 99) - 3.97) < 1e-12);
    QCOMPARE(percentile({7.0}, 99), 7.0);
    QCOMPARE(percentile({}, 50), 0.0);
  }

  void metrics_follow_vllm_definitions() {
    LoadGenResult r;
    r.duration_s = 2.0;
    RequestOutput a;  // 5 tokens: TTFT 0.1, latency 0.5 -> TPOT (0.5 - 0.1) / 4 = 0.1
    a.success = true;
    a.prompt_len = 10;
    a.output_tokens = 5;
    a.ttft_s = 0.1;
    a.latency_s = 0.5;
    a.itl_s = {0.1, 0.1, 0.1, 0.1};
    RequestOutput b;  // 1 token: no TPOT sample (counts as 0 for goodput)
    b.success = true;
    b.prompt_len = 20;
    b.output_tokens = 1;
    b.ttft_s = 0.3;
    b.latency_s = 0.3;
    RequestOutput c;  // failed: counts nowhere but "failed"
    c.success = false;
    c.error = "HTTP 500: boom";
    c.prompt_len = 99;
    r.outputs = {a, b, c};
    GoodputSlo slo;
    slo.ttft_ms = 200;  // a meets it, b does not
    const ServeBenchMetrics m = compute_serve_metrics(r, slo);
    QCOMPARE(m.completed, 2);
    QCOMPARE(m.failed, 1);
    QCOMPARE(m.total_input_tokens, int64_t{30});
    QCOMPARE(m.total_output_tokens, int64_t{6});
    QCOMPARE(m.request_throughput, 1.0);
    QCOMPARE(m.request_goodput, 0.5);
    QCOMPARE(m.output_throughput, 3.0);
    QCOMPARE(m.total_token_throughput, 18.0);
    QVERIFY(std::fabs(m.ttft.mean_ms - 200.0) < 1e-9);
    QVERIFY(std::fabs(m.ttft.median_ms - 200.0) < 1e-9);
    QCOMPARE(m.tpot.count, int64_t{1});
    QVERIFY(std::fabs(m.tpot.mean_ms - 100.0) < 1e-9);
    QCOMPARE(m.itl.count, int64_t{4});
    QVERIFY(std::fabs(m.e2el.mean_ms - 400.0) < 1e-9);
    QVERIFY(std::fabs(m.e2el.std_ms - 100.0) < 1e-9);  // population std of {500, 300}
    QCOMPARE(m.errors, std::vector<std::string>({"HTTP 500: boom"}));
    const json j = serve_metrics_json(m);
    QCOMPARE(j["completed"].get<int>(), 2);
    QVERIFY(j.contains("p99_itl_ms") && j.contains("median_tpot_ms") && j.contains("mean_e2el_ms"));
    const std::string report = format_serve_report(m, slo);
    QVERIFY(report.find("Request goodput (req/s):") != std::string::npos);
    QVERIFY(report.find("P99 ITL (ms):") != std::string::npos);
  }

  void sse_parser_handles_any_split() {
    const std::string stream =
        "data: a\n\ndata: b\r\n\r\n: keep-alive\n\nevent: x\ndata: x\ndata: y\n\ndata: [DONE]\n\n";
    for (size_t step : {size_t{1}, size_t{2}, size_t{7}, stream.size()}) {
      std::vector<std::string> events;
      SseParser p([&](const std::string& d) {
        events.push_back(d);
        return true;
      });
      for (size_t i = 0; i < stream.size(); i += step)
        QVERIFY(p.feed(std::string_view(stream).substr(i, step)));
      QVERIFY(p.finish());
      QCOMPARE(events, std::vector<std::string>({"a", "b", "x\ny", "[DONE]"}));
    }
    // An event cut off by the end of the stream still counts.
    std::vector<std::string> events;
    SseParser p([&](const std::string& d) {
      events.push_back(d);
      return true;
    });
    QVERIFY(p.feed("data: tail"));
    QVERIFY(p.finish());
    QCOMPARE(events, std::vector<std::string>({"tail"}));
  }

  void urls_parse() {
    Result<Url> u = parse_url("http://127.0.0.1:8000");
    LATHE_QVERIFY_RESULT(u);
    QCOMPARE(u->host, std::string("127.0.0.1"));
    QCOMPARE(u->port, 8000);
    QCOMPARE(u->base_path, std::string());
    u = parse_url("localhost/api/");
    QCOMPARE(u->port, 80);
    QCOMPARE(u->base_path, std::string("/api"));
    u = parse_url("http://[::1]:9000");
    QCOMPARE(u->host, std::string("::1"));
    QCOMPARE(u->port, 9000);
    QVERIFY(!parse_url("https://api.openai.com").is_ok());
    QVERIFY(!parse_url("http://host:99999").is_ok());
    QVERIFY(!parse_url("http://:80").is_ok());
  }

  void random_and_prefix_datasets() {
    DatasetOptions o;
    o.num_prompts = 200;
    o.input_len = 100;
    o.output_len = 20;
    o.range_ratio = 0.5;
    o.token_ids = true;
    o.vocab_size = 1000;
    o.seed = 7;
    Result<std::vector<BenchPrompt>> d = make_bench_dataset(o);
    LATHE_QVERIFY_RESULT(d);
    QCOMPARE(static_cast<int>(d->size()), 200);
    int32_t min_in = 1 << 30, max_in = 0;
    for (const BenchPrompt& p : d.value()) {
      QCOMPARE(static_cast<int32_t>(p.token_ids.size()), p.prompt_len);
      QVERIFY(p.prompt_len >= 50 && p.prompt_len <= 150);
      QVERIFY(p.output_len >= 10 && p.output_len <= 30);
      for (const int32_t t : p.token_ids) QVERIFY(t >= 0 && t < 1000);
      min_in = std::min(min_in, p.prompt_len);
      max_in = std::max(max_in, p.prompt_len);
    }
    QVERIFY(max_in - min_in > 50);  // the range is used
    // No two prompts share their first token run (no accidental prefix-cache hits).
    QVERIFY(d.value()[0].token_ids[0] != d.value()[1].token_ids[0] ||
            d.value()[0].token_ids[1] != d.value()[1].token_ids[1]);
    // Same seed, same prompts.
    QCOMPARE(make_bench_dataset(o).value()[5].token_ids, d.value()[5].token_ids);

    o.dataset = "prefix";
    o.prefix_len = 64;
    o.range_ratio = 0;
    Result<std::vector<BenchPrompt>> pre = make_bench_dataset(o);
    LATHE_QVERIFY_RESULT(pre);
    for (const BenchPrompt& p : pre.value()) {
      QCOMPARE(p.prompt_len, 164);
      QVERIFY(std::equal(p.token_ids.begin(), p.token_ids.begin() + 64,
                         pre.value()[0].token_ids.begin()));
    }
    QVERIFY(pre.value()[0].token_ids[64] != pre.value()[1].token_ids[64] ||
            pre.value()[0].token_ids[65] != pre.value()[1].token_ids[65]);

    // Text prompts: about one word per token.
    o.dataset = "random";
    o.prefix_len = 0;
    o.token_ids = false;
    o.input_len = 30;
    Result<std::vector<BenchPrompt>> text = make_bench_dataset(o);
    LATHE_QVERIFY_RESULT(text);
    QCOMPARE(static_cast<int>(split(text.value()[0].text, ' ').size()), 30);
    QVERIFY(text.value()[0].text != text.value()[1].text);

    o.token_ids = true;
    o.vocab_size = 0;
    QVERIFY(!make_bench_dataset(o).is_ok());  // ids need the vocabulary size
  }

  void jsonl_dataset() {
    const std::string path = QDir::tempPath().toStdString() + "/lathe_bench_prompts.jsonl";
    {
      std::ofstream f(path);
      f << "{\"prompt\": \"hello there\", \"output_len\": 5}\n\n{\"prompt_token_ids\": [1, 2, "
           "3]}\n";
    }
    DatasetOptions o;
    o.dataset = path;
    o.num_prompts = 5;
    o.output_len = 9;
    Result<std::vector<BenchPrompt>> d = make_bench_dataset(o);
    LATHE_QVERIFY_RESULT(d);
    QCOMPARE(d.value()[0].text, std::string("hello there"));
    QCOMPARE(d.value()[0].output_len, 5);
    QCOMPARE(d.value()[1].token_ids, std::vector<int32_t>({1, 2, 3}));
    QCOMPARE(d.value()[1].output_len, 9);
    QCOMPARE(d.value()[4].text, std::string("hello there"));  // cycles
    {
      std::ofstream f(path);
      f << "{\"prompt\": 5}\n";
    }
    Result<std::vector<BenchPrompt>> bad = make_bench_dataset(o);
    QVERIFY(!bad.is_ok());
    QVERIFY(bad.status().message().find(":1:") != std::string::npos);  // names the line
    o.dataset = "/nonexistent/prompts.jsonl";
    QVERIFY(!make_bench_dataset(o).is_ok());
  }

  void load_generator_measures_a_known_server() {
    // The fake engine produces one token per 10 ms tick, so ITL and TPOT must come out near 10 ms,
    // the concurrency cap must hold, and every token asked for must be counted.
    FakeEngineOptions eo;
    eo.tick = std::chrono::milliseconds(10);
    FakeEngine engine(eo);
    ServerConfig sc;
    sc.port = 0;
    sc.log_requests = false;
    Result<std::unique_ptr<ApiServer>> server = ApiServer::start(engine, sc);
    LATHE_QVERIFY_RESULT(server);
    LoadGenOptions o;
    o.base_url = local_url(server.value()->port());
    o.model = "fake-model";
    o.max_concurrency = 4;
    o.request_rate = 200;
    DatasetOptions d;
    d.num_prompts = 24;
    d.input_len = 8;
    d.output_len = 12;
    d.token_ids = true;
    d.vocab_size = 258;
    Result<std::vector<BenchPrompt>> prompts = make_bench_dataset(d);
    LATHE_QVERIFY_RESULT(prompts);
    int calls = 0;
    Result<LoadGenResult> r =
        run_load(o, prompts.value(), [&](int32_t, int32_t, int32_t) { ++calls; });
    LATHE_QVERIFY_RESULT(r);
    QCOMPARE(calls, 24);
    const ServeBenchMetrics m = compute_serve_metrics(r.value());
    QVERIFY2(m.errors.empty(), m.errors.empty() ? "" : m.errors[0].c_str());
    QCOMPARE(m.completed, 24);
    QCOMPARE(m.total_output_tokens, int64_t{24 * 12});
    QCOMPARE(m.total_input_tokens, int64_t{24 * 8});
    QCOMPARE(m.itl.count, int64_t{24 * 11});
    QVERIFY(engine.peak_unfinished() <= 4);
    QVERIFY2(m.tpot.mean_ms > 8 && m.tpot.mean_ms < 20, std::to_string(m.tpot.mean_ms).c_str());
    QVERIFY2(m.itl.median_ms > 8 && m.itl.median_ms < 20, std::to_string(m.itl.median_ms).c_str());
    // 24 requests of ~12 ticks at 4 at a time take at least 6 rounds of ~120 ms.
    QVERIFY2(m.duration_s > 0.6, std::to_string(m.duration_s).c_str());

    // Arrivals: with an infinite rate every request goes out at once; at 20 requests/s (Poisson)
    // the 10th goes out after about 9 / 20 s (a Gamma(9, 1/20) draw, below 0.1 s with odds ~1e-4).
    std::vector<BenchPrompt> ten(prompts.value().begin(), prompts.value().begin() + 10);
    o.max_concurrency = 0;
    o.request_rate = std::numeric_limits<double>::infinity();
    Result<LoadGenResult> burst = run_load(o, ten);
    LATHE_QVERIFY_RESULT(burst);
    for (const RequestOutput& out : burst.value().outputs)
      QVERIFY2(out.start_s < 0.1, std::to_string(out.start_s).c_str());
    o.request_rate = 20;
    Result<LoadGenResult> poisson = run_load(o, ten);
    LATHE_QVERIFY_RESULT(poisson);
    double last = 0;
    for (const RequestOutput& out : poisson.value().outputs) {
      QVERIFY(out.start_s >= last);  // in order
      last = out.start_s;
    }
    QVERIFY2(last > 0.1 && last < 3.0, std::to_string(last).c_str());

    // A wrong model name fails every request with the server's message, and nothing hangs.
    o.model = "nope";
    Result<LoadGenResult> bad =
        run_load(o, std::vector<BenchPrompt>(prompts.value().begin(), prompts.value().begin() + 3));
    LATHE_QVERIFY_RESULT(bad);
    const ServeBenchMetrics mb = compute_serve_metrics(bad.value());
    QCOMPARE(mb.failed, 3);
    QVERIFY2(mb.errors.size() == 1 && mb.errors[0].find("HTTP 404") != std::string::npos &&
                 mb.errors[0].find("does not exist") != std::string::npos,
             mb.errors.empty() ? "" : mb.errors[0].c_str());
    server.value()->stop(std::chrono::milliseconds(0));
  }
};

QTEST_GUILESS_MAIN(ServeBenchTest)
#include "serve_bench_test.moc"
