// Helpers shared by the server tests: HTTP calls through Lathe's own client, SSE decoding,
// Prometheus sample lookup, and a child process for `lathe serve` and friends. Every timeout a
// helper takes is scaled by time_scale() (test_support.h: longer under the sanitizers only).
#pragma once

#include <QtTest>

#include <nlohmann/json.hpp>

#include <QFile>
#include <QProcess>

#include <signal.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "engine/bench/http_client.h"
#include "engine/bench/sse_parser.h"
#include "engine/core/strings.h"
#include "engine/server/api_server.h"
#include "test_support.h"

namespace lathe::test {

using json = nlohmann::json;

inline Url local_url(int port) {
  Url u;
  u.host = "127.0.0.1";
  u.port = port;
  return u;
}

inline HttpClientResponse http_call(const Url& url, const std::string& method,
                                    const std::string& path, const std::string& body = {},
                                    std::vector<std::pair<std::string, std::string>> headers = {},
                                    int32_t timeout_ms = 60000) {
  HttpClientRequest req;
  req.method = method;
  req.path = path;
  req.body = body;
  req.headers = std::move(headers);
  if (!body.empty()) req.headers.emplace_back("Content-Type", "application/json");
  req.timeout_ms = scaled_ms(timeout_ms);
  Result<HttpClientResponse> r = http_request(url, req);
  if (!r.is_ok()) {
    HttpClientResponse failed;
    failed.status = -1;
    failed.body = r.status().message();
    return failed;
  }
  return std::move(r).value();
}

// An ApiServer on 127.0.0.1 and a free port, request log off; qFatal when it does not start.
inline std::unique_ptr<ApiServer> start_server(Engine& engine, ServerConfig config = {}) {
  config.host = "127.0.0.1";
  config.port = 0;
  config.log_requests = false;
  Result<std::unique_ptr<ApiServer>> s = ApiServer::start(engine, config);
  if (!s.is_ok()) qFatal("server did not start: %s", s.status().message().c_str());
  return std::move(s).value();
}

inline json parse_json(const std::string& s) {
  return json::parse(s, nullptr, false);
}

// True when `body` is {"error": {"message": non-empty string, "type": string, ...}}.
inline bool is_openai_error(const std::string& body) {
  const json j = parse_json(body);
  return !j.is_discarded() && j.is_object() && j.contains("error") && j["error"].is_object() &&
         j["error"].contains("message") && j["error"]["message"].is_string() &&
         !j["error"]["message"].get<std::string>().empty() && j["error"].contains("type") &&
         j["error"].contains("param") && j["error"].contains("code");
}

// A streamed response: its status, and the data of each SSE event in order.
struct SseResponse {
  int status = 0;
  std::vector<std::string> events;
  std::string error;
};

inline SseResponse sse_call(const Url& url, const std::string& path, const std::string& body,
                            std::vector<std::pair<std::string, std::string>> headers = {},
                            int32_t timeout_ms = 120000) {
  SseResponse out;
  SseParser parser([&](const std::string& data) {
    out.events.push_back(data);
    return true;
  });
  HttpClientRequest req;
  req.method = "POST";
  req.path = path;
  req.body = body;
  req.headers = std::move(headers);
  req.headers.emplace_back("Content-Type", "application/json");
  req.timeout_ms = scaled_ms(timeout_ms);
  Result<HttpClientResponse> r =
      http_request(url, req, [&](std::string_view piece) { return parser.feed(piece); });
  if (!r.is_ok()) {
    out.status = -1;
    out.error = r.status().message();
    return out;
  }
  parser.finish();
  out.status = r.value().status;
  return out;
}

// The value of the first Prometheus sample named `name` whose labels contain `label` ("" = any);
// NaN when absent.
inline double prometheus_value(const std::string& text, const std::string& name,
                               const std::string& label = "") {
  for (const std::string& line : split(text, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    if (!starts_with(line, name)) continue;
    const char next = line.size() > name.size() ? line[name.size()] : '\0';
    if (next != '{' && next != ' ') continue;
    const size_t space = line.rfind(' ');
    const std::string series = line.substr(0, space);
    if (!label.empty() && series.find(label) == std::string::npos) continue;
    return std::strtod(line.c_str() + space + 1, nullptr);
  }
  return std::nan("");
}

// Polls GET /health until it answers 200 (or the timeout passes).
inline bool wait_for_health(const Url& url, std::chrono::milliseconds timeout) {
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::duration_cast<std::chrono::milliseconds>(timeout * time_scale());
  while (std::chrono::steady_clock::now() < deadline) {
    if (http_call(url, "GET", "/health", {}, {}, 2000).status == 200) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

// A free TCP port on 127.0.0.1 (bound then released; fine for tests).
inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

// Paths the build gives the tests (tests/server/CMakeLists.txt).
inline QString env_path(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? QString::fromUtf8(v) : QString();
}
inline QString lathe_binary() {
  return env_path("LATHE_BIN");
}
inline QString server_tests_dir() {
  return env_path("LATHE_SERVER_TESTS_DIR");
}

inline std::string read_file(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) return {};
  return f.readAll().toStdString();
}

// A program run in the background with its output (stdout and stderr) in a log file, so a chatty
// child never blocks on a full pipe. Killed on destruction if still running.
class BackgroundProcess {
 public:
  explicit BackgroundProcess(QString log_path) : log_path_(std::move(log_path)) {}
  ~BackgroundProcess() {
    if (process_.state() != QProcess::NotRunning) {
      process_.kill();
      process_.waitForFinished(5000);
    }
  }
  bool start(const QString& program, const QStringList& args) {
    process_.setStandardOutputFile(log_path_);
    process_.setStandardErrorFile(log_path_, QIODevice::Append);
    process_.start(program, args);
    return process_.waitForStarted(10000);
  }
  // SIGTERM (QProcess::terminate) or SIGINT.
  void terminate() { process_.terminate(); }
  void interrupt() {
    if (process_.processId() > 0) ::kill(static_cast<pid_t>(process_.processId()), SIGINT);
  }
  // Exit code, or -1 when it did not exit in time / crashed.
  int wait(int timeout_ms) {
    if (!process_.waitForFinished(scaled_ms(timeout_ms))) return -1;
    return process_.exitStatus() == QProcess::NormalExit ? process_.exitCode() : -1;
  }
  bool running() const { return process_.state() != QProcess::NotRunning; }
  std::string log() const { return read_file(log_path_); }

 private:
  QString log_path_;
  QProcess process_;
};

// Runs a program to completion; returns its exit code (-1 on timeout) and its merged output.
inline int run_program(const QString& program, const QStringList& args, int timeout_ms,
                       std::string* output) {
  QProcess p;
  p.setProcessChannelMode(QProcess::MergedChannels);
  p.start(program, args);
  if (!p.waitForStarted(10000)) {
    *output = "cannot start " + program.toStdString();
    return -1;
  }
  QByteArray all;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(scaled_ms(timeout_ms));
  while (!p.waitForFinished(200)) {
    all += p.readAll();
    if (std::chrono::steady_clock::now() > deadline) {
      p.kill();
      p.waitForFinished(5000);
      *output = (all + p.readAll()).toStdString();
      return -1;
    }
  }
  all += p.readAll();
  *output = all.toStdString();
  return p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
}

// `lathe serve` on the default model, CPU, on a free port, waiting until /health answers.
inline bool start_lathe_serve(BackgroundProcess& process, int* port,
                              const QStringList& extra = {}) {
  *port = free_port();
  QStringList args = {"serve", "--port", QString::number(*port), "--device", "cpu"};
  args += extra;
  if (!process.start(lathe_binary(), args)) return false;
  return wait_for_health(local_url(*port), std::chrono::seconds(120));
}

}  // namespace lathe::test
