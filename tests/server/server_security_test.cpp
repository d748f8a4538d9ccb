// The server's security defaults (docs/RELIABILITY.md, engine/server/server_security.h) against a
// fake engine: loopback bind and the exposure warning, the constant-time key compare, browser
// origins, DNS rebinding (the Host check), and no prompt text in /health or /metrics.
#include <QtTest>

#include <memory>

#include "engine/core/strings.h"
#include "engine/server/api_server.h"
#include "engine/server/server_security.h"
#include "fake_server_fixture.h"
#include "server_test_util.h"
#include "test_support.h"

using namespace lathe;
using namespace lathe::test;

class ServerSecurityTest : public QObject, private FakeServerFixture {
  Q_OBJECT

 private slots:
  void initTestCase() { start_fake_server(); }
  void cleanupTestCase() { stop_fake_server(); }

  // Security defaults (docs/RELIABILITY.md): loopback bind, the exposure warning, the key compare.
  void security_defaults() {
    QCOMPARE(ServerConfig{}.host, std::string("127.0.0.1"));
    QVERIFY(ServerConfig{}.allowed_origins.empty());
    ServerConfig defaults;
    defaults.port = 0;
    defaults.log_requests = false;
    Result<std::unique_ptr<ApiServer>> s = ApiServer::start(*engine_, defaults);
    LATHE_QVERIFY_RESULT(s);
    QVERIFY(starts_with(s.value()->url(), "http://127.0.0.1:"));
    s.value()->stop(std::chrono::milliseconds(0));

    ServerConfig c;
    QVERIFY(exposure_warning(c).empty());  // loopback
    c.host = "0.0.0.0";
    QVERIFY(exposure_warning(c).find("every interface") != std::string::npos);
    QVERIFY(exposure_warning(c).find("--api-key") != std::string::npos);
    c.host = "192.168.1.5";
    QVERIFY(!exposure_warning(c).empty());
    c.api_key = "k";
    QVERIFY(exposure_warning(c).empty());
    for (const char* h : {"127.0.0.1", "127.1.2.3", "::1", "localhost"})
      QVERIFY(is_loopback_host(h));
    for (const char* h : {"0.0.0.0", "::", "10.0.0.1", "128.0.0.1", "127.evil.example",
                          "127.0.0.1.evil.example", "127.0.0.256", "127.0.0", "127..0.1"})
      QVERIFY2(!is_loopback_host(h), h);

    QVERIFY(equal_constant_time("sekrit", "sekrit"));
    QVERIFY(equal_constant_time("", ""));
    QVERIFY(!equal_constant_time("sekrit", "sekri"));  // a prefix
    QVERIFY(!equal_constant_time("sekri", "sekrit"));
    QVERIFY(!equal_constant_time("sekrit", "sekriT"));  // last byte
    QVERIFY(!equal_constant_time("sekrit", ""));
    QVERIFY(!equal_constant_time(std::string("a\0b", 3), std::string("a\0c", 3)));
    QVERIFY(!equal_constant_time(std::string("ab\0", 3), "ab"));  // padding is not a match
  }

  // Without --allowed-origins a browser page (any request with Origin) gets 403 and no CORS
  // headers; listed origins get Access-Control-Allow-Origin and a preflight answer.
  void browser_origins_refused_unless_allowed() {
    const std::string body = json({{"prompt", "x"}, {"max_tokens", 1}}).dump();
    HttpClientResponse page =
        http_call(url_, "POST", "/v1/completions", body, {{"Origin", "http://evil.example"}});
    QCOMPARE(page.status, 403);
    QVERIFY(is_openai_error(page.body));
    QVERIFY(page.body.find("--allowed-origins") != std::string::npos);
    QVERIFY(page.header("Access-Control-Allow-Origin").empty());
    QCOMPARE(http_call(url_, "GET", "/metrics", {}, {{"Origin", "null"}}).status, 403);
    HttpClientResponse plain = http_call(url_, "POST", "/v1/completions", body);
    QCOMPARE(plain.status, 200);  // no Origin: not a browser page
    QVERIFY(plain.header("Access-Control-Allow-Origin").empty());
    QVERIFY(http_call(url_, "OPTIONS", "/v1/completions", {}, {{"Origin", "http://evil.example"}})
                .status >= 400);

    ServerConfig config;
    config.allowed_origins = {"http://localhost:3000"};
    std::unique_ptr<ApiServer> cors = start_server(*engine_, config);
    const Url url = local_url(cors->port());
    HttpClientResponse ok =
        http_call(url, "POST", "/v1/completions", body, {{"Origin", "http://localhost:3000"}});
    QCOMPARE(ok.status, 200);
    QCOMPARE(ok.header("Access-Control-Allow-Origin"), std::string("http://localhost:3000"));
    HttpClientResponse pre =
        http_call(url, "OPTIONS", "/v1/chat/completions", {},
                  {{"Origin", "http://localhost:3000"}, {"Access-Control-Request-Method", "POST"}});
    QCOMPARE(pre.status, 204);
    QCOMPARE(pre.header("Access-Control-Allow-Origin"), std::string("http://localhost:3000"));
    QVERIFY(pre.header("Access-Control-Allow-Headers").find("Authorization") != std::string::npos);
    QCOMPARE(http_call(url, "POST", "/v1/completions", body, {{"Origin", "http://other.example"}})
                 .status,
             403);
    QCOMPARE(http_call(url, "OPTIONS", "/v1/completions", {}, {{"Origin", "http://other.example"}})
                 .status,
             403);
    cors->stop(std::chrono::milliseconds(0));
  }

  // A page whose own name was re-pointed at 127.0.0.1 (DNS rebinding) sends its name as Host:
  // refused on every route, GET included; loopback names and --allowed-hosts pass.
  void dns_rebinding_hosts_refused() {
    const std::string port = std::to_string(server_->port());
    for (const std::string& host :
         std::vector<std::string>{"evil.example:" + port, "evil.example", "127.evil.example",
                                  "127.0.0.1.evil.example:" + port, "192.168.1.5:" + port}) {
      for (const char* path : {"/health", "/metrics", "/v1/models"}) {
        const HttpClientResponse r = http_call(url_, "GET", path, {}, {{"Host", host}});
        QVERIFY2(r.status == 403, qPrintable(QString::fromStdString(host + " " + path)));
        QVERIFY(is_openai_error(r.body));
        QVERIFY(r.body.find("--allowed-hosts") != std::string::npos);
      }
      const std::string body = json({{"prompt", "x"}, {"max_tokens", 1}}).dump();
      QCOMPARE(http_call(url_, "POST", "/v1/completions", body, {{"Host", host}}).status, 403);
    }
    for (const std::string& host :
         std::vector<std::string>{"localhost:" + port, "LOCALHOST", "127.0.0.1:" + port,
                                  "127.1.2.3", "[::1]:" + port, "localhost."})
      QVERIFY2(http_call(url_, "GET", "/v1/models", {}, {{"Host", host}}).status == 200,
               host.c_str());

    ServerConfig config;
    config.allowed_hosts = {"lathe.internal"};
    std::unique_ptr<ApiServer> named = start_server(*engine_, config);
    const Url url = local_url(named->port());
    QCOMPARE(http_call(url, "GET", "/v1/models", {}, {{"Host", "Lathe.Internal:9"}}).status, 200);
    QCOMPARE(http_call(url, "GET", "/v1/models", {}, {{"Host", "evil.example"}}).status, 403);
    named->stop(std::chrono::milliseconds(0));

    // The rule itself: other binds take any name unless --allowed-hosts is set.
    ServerConfig lan;
    lan.host = "0.0.0.0";
    QVERIFY(host_allowed(lan, "my-box.local:8000"));
    lan.allowed_hosts = {"my-box.local"};
    QVERIFY(host_allowed(lan, "my-box.local:8000"));
    QVERIFY(!host_allowed(lan, "evil.example"));
    QVERIFY(host_allowed(ServerConfig{}, ""));  // HTTP/1.0: no Host
    ServerConfig any;
    any.allowed_hosts = {"*"};
    QVERIFY(host_allowed(any, "evil.example"));
  }

  // /health and /metrics never show what was asked.
  void health_and_metrics_reveal_no_prompt_text() {
    const std::string marker = "zebra-7f3a-secret-prompt";
    QCOMPARE(http_call(url_, "POST", "/v1/completions",
                       json({{"prompt", marker}, {"max_tokens", 2}}).dump())
                 .status,
             200);
    const json msgs = {{{"role", "user"}, {"content", marker}}};
    QCOMPARE(http_call(url_, "POST", "/v1/chat/completions",
                       json({{"messages", msgs}, {"max_tokens", 2}}).dump())
                 .status,
             200);
    http_call(url_, "POST", "/v1/completions",
              json({{"prompt", marker}, {"max_tokens", -1}}).dump());  // rejected, still no echo
    for (const char* path : {"/health", "/metrics", "/version", "/v1/models"}) {
      const HttpClientResponse r = http_call(url_, "GET", path);
      QCOMPARE(r.status, 200);
      QVERIFY2(r.body.find(marker) == std::string::npos, path);
      QVERIFY2(r.body.find("zebra") == std::string::npos, path);
    }
  }
};

QTEST_GUILESS_MAIN(ServerSecurityTest)
#include "server_security_test.moc"
