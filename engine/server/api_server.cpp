#include "engine/server/api_server.h"

#include <csignal>
#include <mutex>
#include <thread>

#include "engine/core/log.h"
#include "engine/core/strings.h"
#include "engine/runtime/engine.h"
#include "engine/server/http_server.h"
#include "engine/server/routes.h"
#include "engine/server/server_context.h"

namespace lathe {
namespace {

std::string resolve_model_name(const Engine& engine, const ServerConfig& config) {
  if (!config.served_model_name.empty()) return config.served_model_name;
  if (!engine.config().served_model_name.empty()) return engine.config().served_model_name;
  if (!engine.model().config.name.empty()) return engine.model().config.name;
  // The file or folder name without directories.
  std::string path = engine.model().path;
  while (!path.empty() && path.back() == '/') path.pop_back();
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

class ApiServerImpl final : public ApiServer {
 public:
  ApiServerImpl(Engine& engine, const ServerConfig& config, std::unique_ptr<HttpServer> http)
      : http_(std::move(http)), ctx_(engine, config, resolve_model_name(engine, config)) {}

  ~ApiServerImpl() override { stop(std::chrono::milliseconds(0)); }

  Status serve() {
    register_routes(*http_, ctx_);
    return http_->start();
  }

  void stop(std::chrono::milliseconds grace) override {
    std::lock_guard<std::mutex> lock(stop_mutex_);
    if (stopped_) return;
    ctx_.draining.store(true);
    const int64_t in_flight = ctx_.num_active();
    if (in_flight > 0) {
      log_info(strformat("server: stopping; waiting up to %.1f s for %lld request(s) in flight",
                         grace.count() / 1000.0, static_cast<long long>(in_flight)));
    }
    if (!ctx_.wait_until_idle(grace)) {
      // Abort what is left (streams end with finish_reason "abort") and wait for the handlers to
      // write their last bytes. Aborts repeat in case a request was submitted meanwhile.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      int64_t aborted = 0;
      while (ctx_.num_active() > 0 && std::chrono::steady_clock::now() < deadline) {
        aborted += ctx_.abort_all_active();
        ctx_.wait_until_idle(std::chrono::milliseconds(50));
      }
      log_info(strformat("server: aborted %lld request(s) still running after the grace period",
                         static_cast<long long>(aborted)));
    }
    http_->stop();
    stopped_ = true;
    log_info("server: stopped");
  }

  std::string url() const override {
    std::string host = http_->host();
    if (host.find(':') != std::string::npos) host = "[" + host + "]";
    return strformat("http://%s:%d", host.c_str(), http_->port());
  }
  int port() const override { return http_->port(); }
  const std::string& model_name() const override { return ctx_.model_name; }
  bool is_stopping() const override { return ctx_.draining.load(); }

  ServerStats stats() const override {
    ServerStats s;
    s.requests_total = ctx_.requests_total.load();
    s.requests_rejected = ctx_.requests_rejected.load();
    s.requests_in_flight = ctx_.num_active();
    s.client_disconnects = ctx_.client_disconnects.load();
    s.open_connections = http_->open_connections();
    return s;
  }

  void set_request_log_callback(RequestLogCallback callback) override {
    ctx_.request_log.set_callback(std::move(callback));
  }

 protected:
  double default_grace_s() const override { return ctx_.config.shutdown_grace_s; }

 private:
  std::unique_ptr<HttpServer> http_;
  ServerContext ctx_;
  std::mutex stop_mutex_;
  bool stopped_ = false;
};

}  // namespace

void ApiServer::stop() {
  stop(std::chrono::milliseconds(static_cast<int64_t>(default_grace_s() * 1000.0)));
}

Result<std::unique_ptr<ApiServer>> ApiServer::start(Engine& engine, const ServerConfig& config) {
  if (config.shutdown_grace_s < 0)
    return invalid_argument("the shutdown grace period must be >= 0 seconds");
  // A client that disconnects mid-write must not kill the process.
  std::signal(SIGPIPE, SIG_IGN);
  HttpServerConfig http;
  http.host = config.host;
  http.port = config.port;
  http.max_body_bytes = config.max_body_bytes;
  http.max_connections = config.max_connections;
  http.read_timeout_ms = config.read_timeout_ms;
  LATHE_ASSIGN_OR_RETURN(std::unique_ptr<HttpServer> server, HttpServer::create(http));
  auto api = std::make_unique<ApiServerImpl>(engine, config, std::move(server));
  LATHE_RETURN_IF_ERROR(api->serve());
  return std::unique_ptr<ApiServer>(std::move(api));
}

}  // namespace lathe
