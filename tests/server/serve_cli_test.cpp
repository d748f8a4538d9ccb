// `lathe serve` as a user runs it (a child process on the default model, CPU): it logs the URL,
// the model and the KV plan, and a line per request; a second server on the same port fails with
// a clear message; SIGINT lets in-flight requests end (aborted after --shutdown-timeout, their
// streams closed properly) and exits 0; so does SIGTERM.
#include <QtTest>

#include <filesystem>
#include <thread>

#include "server_test_util.h"
#include "test_support.h"

using namespace lathe;
using namespace lathe::test;

class ServeCliTest : public QObject {
  Q_OBJECT

  QString log_path(const char* name) {
    return QDir::tempPath() + "/lathe_serve_cli_" + name + ".log";
  }

 private slots:
  void initTestCase() {
    if (!std::filesystem::exists(test::default_model_path()))
      QSKIP("the default model is not in the cache; run scripts/fetch-default-model.sh");
    QVERIFY2(!lathe_binary().isEmpty(), "LATHE_BIN is not set");
  }

  void logs_start_and_requests_then_stops_on_sigterm() {
    BackgroundProcess serve(log_path("start"));
    int port = 0;
    QVERIFY2(start_lathe_serve(serve, &port, {"--served-model-name", "smol", "--api-key", "k3y"}),
             serve.log().c_str());
    const Url url = local_url(port);
    const std::string start_log = serve.log();
    QVERIFY2(start_log.find("http://127.0.0.1:" + std::to_string(port)) != std::string::npos,
             start_log.c_str());
    QVERIFY2(start_log.find("smol") != std::string::npos, start_log.c_str());
    QVERIFY2(start_log.find("KV cache:") != std::string::npos, start_log.c_str());

    HttpClientResponse r =
        http_call(url, "POST", "/v1/completions",
                  json({{"model", "smol"}, {"prompt", "Hello"}, {"max_tokens", 3}}).dump(),
                  {{"Authorization", "Bearer k3y"}});
    QCOMPARE(r.status, 200);
    const std::string id = parse_json(r.body)["id"].get<std::string>();
    QTRY_VERIFY_WITH_TIMEOUT(serve.log().find(id) != std::string::npos, 5000);
    const std::string log = serve.log();
    const std::string line = log.substr(log.find(id), log.find('\n', log.find(id)) - log.find(id));
    QVERIFY2(line.find("prompt=") != std::string::npos &&
                 line.find("generated=3") != std::string::npos &&
                 line.find("ttft=") != std::string::npos &&
                 line.find("tok/s") != std::string::npos &&
                 line.find("finish=length") != std::string::npos,
             line.c_str());

    // A second server on the same port says so and exits non-zero.
    std::string second;
    const int code =
        run_program(lathe_binary(), {"serve", "--port", QString::number(port), "--device", "cpu"},
                    120000, &second);
    QVERIFY2(code != 0 && code != -1, second.c_str());
    QVERIFY2(second.find("already in use") != std::string::npos, second.c_str());
    QCOMPARE(http_call(url, "GET", "/health").status, 200);  // the first one is unharmed

    serve.terminate();
    QCOMPARE(serve.wait(15000), 0);
  }

  void sigint_ends_in_flight_streams_and_exits_0() {
    BackgroundProcess serve(log_path("sigint"));
    int port = 0;
    QVERIFY2(start_lathe_serve(serve, &port, {"--shutdown-timeout", "1"}), serve.log().c_str());
    const Url url = local_url(port);
    std::atomic<bool> streaming{false};
    SseResponse stream;
    std::thread client([&] {
      SseParser parser([&](const std::string& d) {
        stream.events.push_back(d);
        streaming = true;
        return true;
      });
      HttpClientRequest req;
      req.method = "POST";
      req.path = "/v1/completions";
      req.body = json({{"prompt", "Tell me a long story."},
                       {"max_tokens", 800},
                       {"ignore_eos", true},
                       {"stream", true}})
                     .dump();
      Result<HttpClientResponse> r =
          http_request(url, req, [&](std::string_view p) { return parser.feed(p); });
      stream.status = r.is_ok() ? r.value().status : -1;
    });
    QTRY_VERIFY_WITH_TIMEOUT(streaming.load(), 60000);
    const auto t0 = std::chrono::steady_clock::now();
    serve.interrupt();
    client.join();
    const int code = serve.wait(20000);
    const double stop_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    QVERIFY2(code == 0, serve.log().c_str());
    QVERIFY2(stop_s < 10.0, std::to_string(stop_s).c_str());
    QCOMPARE(stream.status, 200);
    QVERIFY(!stream.events.empty());
    QCOMPARE(stream.events.back(), std::string("[DONE]"));
    std::string finish;
    for (const std::string& e : stream.events) {
      const json j = parse_json(e);
      if (!j.is_discarded() && j.contains("choices") && !j["choices"].empty() &&
          j["choices"][0]["finish_reason"].is_string())
        finish = j["choices"][0]["finish_reason"].get<std::string>();
    }
    QCOMPARE(finish, std::string("abort"));
    const std::string log = serve.log();
    QVERIFY2(log.find("SIGINT") != std::string::npos && log.find("stopped") != std::string::npos,
             log.c_str());
  }
};

QTEST_GUILESS_MAIN(ServeCliTest)
#include "serve_cli_test.moc"
