// `lathe bench serve` end to end:
//  - against `lathe serve` (default model, CPU): its counts equal the engine's own counters for
//    the same run exactly (requests, prompt tokens, generated tokens) and its mean TTFT, TPOT, ITL
//    and E2E latency agree with the engine's histograms within noise (the client also sees the
//    HTTP hop);
//  - against `lathe serve --load-format dummy` (no tokenizer): token-id prompts, a chunk per token;
//  - against a second, independent OpenAI-compatible server (fake_openai_server.py, stdlib only,
//    HTTP/1.0 framing) whose timing is known: it reports that timing, for completions and chat,
//    and a concurrency sweep prints its table and JSON.
#include <QtTest>

#include <cmath>
#include <filesystem>

#include "server_test_util.h"
#include "test_support.h"

using namespace lathe;
using namespace lathe::test;

namespace {

// Mean of a Prometheus histogram: _sum / _count.
double histogram_mean(const std::string& metrics, const std::string& name) {
  const double sum = prometheus_value(metrics, name + "_sum");
  const double count = prometheus_value(metrics, name + "_count");
  return count > 0 ? sum / count : std::nan("");
}

double counter_sum(const std::string& metrics, const std::string& name) {
  double total = 0;
  for (const std::string& line : split(metrics, '\n')) {
    if (!starts_with(line, name + "{") && !starts_with(line, name + " ")) continue;
    total += std::strtod(line.c_str() + line.rfind(' ') + 1, nullptr);
  }
  return total;
}

json read_json(const QString& path) {
  return parse_json(read_file(path));
}

}  // namespace

class BenchServeTest : public QObject {
  Q_OBJECT

  QString tmp(const char* name) { return QDir::tempPath() + "/lathe_bench_serve_" + name; }

 private slots:
  void initTestCase() { QVERIFY2(!lathe_binary().isEmpty(), "LATHE_BIN is not set"); }

  void matches_the_engines_own_metrics() {
    if (!std::filesystem::exists(test::default_model_path()))
      QSKIP("the default model is not in the cache; run scripts/fetch-default-model.sh");
    BackgroundProcess serve(tmp("serve.log"));
    int port = 0;
    QVERIFY2(start_lathe_serve(serve, &port, {"--disable-log-requests"}), serve.log().c_str());
    const QString out = tmp("lathe.json");
    std::string output;
    const int code = run_program(
        lathe_binary(),
        {"bench", "serve", "--base-url", QString("http://127.0.0.1:%1").arg(port), "--num-prompts",
         "24", "--input-len", "32", "--output-len", "8", "--ignore-eos", "--max-concurrency", "4",
         "--seed", "3", "--json", out, "--no-progress", "--skip-test-request"},
        300000, &output);
    QVERIFY2(code == 0, output.c_str());
    QVERIFY2(output.find("Serving Benchmark Result") != std::string::npos, output.c_str());
    const json b = read_json(out);
    QVERIFY2(!b.is_discarded(), output.c_str());
    const std::string m = http_call(local_url(port), "GET", "/metrics").body;

    // Counts: exactly the engine's.
    QCOMPARE(b["completed"].get<int>(), 24);
    QCOMPARE(b["failed"].get<int>(), 0);
    QCOMPARE(b["prompt_format"].get<std::string>(),
             std::string("token-ids"));  // Lathe reports its vocabulary
    QCOMPARE(b["total_input_tokens"].get<double>(),
             prometheus_value(m, "lathe:prompt_tokens_total"));
    QCOMPARE(b["total_input_tokens"].get<int>(), 24 * 32);
    QCOMPARE(b["total_output_tokens"].get<double>(),
             prometheus_value(m, "lathe:generation_tokens_total"));
    QCOMPARE(b["total_output_tokens"].get<int>(), 24 * 8);
    QCOMPARE(counter_sum(m, "lathe:request_success_total"), 24.0);
    QCOMPARE(static_cast<double>(b["itls"].size()), 24.0);

    // Latencies: the client's view is the engine's plus the HTTP hop (a few ms on loopback).
    struct Pair {
      const char* what;
      double client_ms, engine_ms;
    };
    const std::vector<Pair> pairs = {
        {"TTFT", b["mean_ttft_ms"].get<double>(),
         1000 * histogram_mean(m, "lathe:time_to_first_token_seconds")},
        {"TPOT", b["mean_tpot_ms"].get<double>(),
         1000 * histogram_mean(m, "lathe:request_time_per_output_token_seconds")},
        {"ITL", b["mean_itl_ms"].get<double>(),
         1000 * histogram_mean(m, "lathe:inter_token_latency_seconds")},
        {"E2E", b["mean_e2el_ms"].get<double>(),
         1000 * histogram_mean(m, "lathe:e2e_request_latency_seconds")},
    };
    for (const Pair& p : pairs) {
      qInfo("mean %s: bench serve %.1f ms, engine %.1f ms", p.what, p.client_ms, p.engine_ms);
      const bool close = std::fabs(p.client_ms - p.engine_ms) <= 0.15 * p.engine_ms + 15.0;
      QVERIFY2(std::isfinite(p.engine_ms) && p.engine_ms > 0 && close,
               (std::string(p.what) + ": " + std::to_string(p.client_ms) + " vs " +
                std::to_string(p.engine_ms))
                   .c_str());
    }
    serve.terminate();
    QCOMPARE(serve.wait(15000), 0);
  }

  void token_id_prompts_work_without_a_tokenizer() {
    // --load-format dummy: random weights, no tokenizer. Token-id prompts still run, and each
    // token still gets its chunk (with empty text), so the load generator can time it.
    BackgroundProcess serve(tmp("dummy.log"));
    int port = 0;
    QVERIFY2(start_lathe_serve(
                 serve, &port,
                 {server_tests_dir() + "/../../benchmarks/configs/smollm2-135m", "--load-format",
                  "dummy", "--max-model-len", "256", "--disable-log-requests"}),
             serve.log().c_str());
    const QString out = tmp("dummy.json");
    std::string output;
    const int code =
        run_program(lathe_binary(),
                    {"bench", "serve", "--base-url", QString("http://127.0.0.1:%1").arg(port),
                     "--num-prompts", "4", "--input-len", "16", "--output-len", "4", "--ignore-eos",
                     "--json", out, "--no-progress"},
                    300000, &output);
    QVERIFY2(code == 0, output.c_str());
    const json b = read_json(out);
    QCOMPARE(b["prompt_format"].get<std::string>(), std::string("token-ids"));
    QCOMPARE(b["completed"].get<int>(), 4);
    QCOMPARE(b["total_input_tokens"].get<int>(), 4 * 16);
    QCOMPARE(b["total_output_tokens"].get<int>(), 4 * 4);
    QCOMPARE(static_cast<int>(b["itls"][0].size()), 3);  // a chunk per token
    // Text needs a tokenizer: a clear 400.
    HttpClientResponse chat =
        http_call(local_url(port), "POST", "/v1/chat/completions",
                  json({{"messages", {{{"role", "user"}, {"content", "hi"}}}}}).dump());
    QCOMPARE(chat.status, 400);
    QVERIFY2(chat.body.find("no tokenizer") != std::string::npos, chat.body.c_str());
    HttpClientResponse info = http_call(local_url(port), "GET", "/tokenizer_info");
    QCOMPARE(info.status, 400);
    QVERIFY2(info.body.find("no tokenizer") != std::string::npos, info.body.c_str());
    serve.terminate();
    QCOMPARE(serve.wait(15000), 0);
  }

  void works_against_an_independent_server() {
    const int port = free_port();
    BackgroundProcess py(tmp("python.log"));
    QVERIFY(py.start("python3", {server_tests_dir() + "/fake_openai_server.py", "--port",
                                 QString::number(port), "--ttft-ms", "100", "--itl-ms", "20"}));
    const Url url = local_url(port);
    QVERIFY2(wait_for_health(url, std::chrono::seconds(30)), py.log().c_str());

    const QString out = tmp("python.json");
    std::string output;
    int code = run_program(
        lathe_binary(),
        {"bench", "serve", "--base-url", QString("http://127.0.0.1:%1").arg(port), "--num-prompts",
         "12", "--input-len", "20", "--output-len", "10", "--max-concurrency", "4",
         "--request-rate", "50", "--json", out, "--no-progress"},
        120000, &output);
    QVERIFY2(code == 0, output.c_str());
    json b = read_json(out);
    QCOMPARE(b["model_id"].get<std::string>(),
             std::string("fake-python-model"));  // from its /v1/models
    QCOMPARE(b["prompt_format"].get<std::string>(), std::string("text"));
    QCOMPARE(b["completed"].get<int>(), 12);
    QCOMPARE(b["total_output_tokens"].get<int>(), 120);
    QCOMPARE(b["total_input_tokens"].get<int>(),
             12 * 20);  // its usage counts words, our prompts are 20 words
    const double ttft = b["mean_ttft_ms"].get<double>(), itl = b["mean_itl_ms"].get<double>(),
                 tpot = b["mean_tpot_ms"].get<double>();
    qInfo(
        "python server (TTFT 100 ms, ITL 20 ms): bench serve says TTFT %.1f, ITL %.1f, TPOT %.1f "
        "ms",
        ttft, itl, tpot);
    QVERIFY2(ttft > 95 && ttft < 160, std::to_string(ttft).c_str());
    QVERIFY2(itl > 18 && itl < 35, std::to_string(itl).c_str());
    QVERIFY2(tpot > 18 && tpot < 35, std::to_string(tpot).c_str());
    // The initial test request plus the 12.
    json stats = parse_json(http_call(url, "GET", "/stats").body);
    QCOMPARE(stats["requests"].get<int>(), 13);

    // Chat, as a sweep over concurrency levels: a table on stdout, one JSON row per level.
    code = run_program(
        lathe_binary(),
        {"bench", "serve", "--base-url", QString("http://127.0.0.1:%1").arg(port), "--endpoint",
         "/v1/chat/completions", "--num-prompts", "6", "--input-len", "10", "--output-len", "5",
         "--sweep-concurrency", "1,3", "--json", out, "--no-progress"},
        120000, &output);
    QVERIFY2(code == 0, output.c_str());
    QVERIFY2(output.find("concurrency") != std::string::npos &&
                 output.find("TTFT mean") != std::string::npos,
             output.c_str());
    b = read_json(out);
    QCOMPARE(static_cast<int>(b["sweep"].size()), 2);
    QCOMPARE(b["sweep"][0]["max_concurrency"].get<int>(), 1);
    QCOMPARE(b["sweep"][1]["max_concurrency"].get<int>(), 3);
    for (const json& row : b["sweep"]) {
      QCOMPARE(row["completed"].get<int>(), 6);
      QCOMPARE(row["total_output_tokens"].get<int>(), 30);
    }
    // One at a time takes longer than three at a time.
    QVERIFY(b["sweep"][0]["duration"].get<double>() > b["sweep"][1]["duration"].get<double>());

    // A server that is not there: a clear error and a non-zero exit, quickly.
    code = run_program(
        lathe_binary(),
        {"bench", "serve", "--base-url", QString("http://127.0.0.1:%1").arg(free_port()), "--model",
         "x", "--num-prompts", "2", "--no-progress"},
        60000, &output);
    QVERIFY2(code == 1 && output.find("cannot connect") != std::string::npos, output.c_str());
  }
};

QTEST_GUILESS_MAIN(BenchServeTest)
#include "bench_serve_test.moc"
