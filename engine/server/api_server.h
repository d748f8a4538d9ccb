// The OpenAI-compatible HTTP server over an Engine: what `lathe serve` runs and what Lathe Studio
// starts and stops from its Serve view.
//
//   auto server = ApiServer::start(*engine, {.host = "127.0.0.1", .port = 8000});
//   if (!server) show(server.status().message());   // e.g. "port 8000 is already in use"
//   log(server.value()->url());                      // "http://127.0.0.1:8000"
//   server.value()->set_request_log_callback(...);   // one entry per request, any thread
//   ...
//   server.value()->stop();  // graceful: in-flight requests finish (or are aborted after the
//   grace)
//
// Endpoints: POST /v1/chat/completions, POST /v1/completions (streaming or not), GET /v1/models,
// GET /health, GET /metrics (the engine's Prometheus text), POST /tokenize, POST /detokenize.
// Errors come in OpenAI's JSON shape. The engine must outlive the server.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/server/request_log.h"

namespace lathe {

class Engine;

struct ServerConfig {
  std::string host = "127.0.0.1";  // 0.0.0.0 listens on every interface
  int port = 8000;                 // 0: any free port (read it back with port())
  std::string
      api_key;  // non-empty: /v1/*, /tokenize and /detokenize need "Authorization: Bearer <key>"
  // Origins whose browser pages may call the server (CORS, as vLLM's --allowed-origins); "*" for
  // any. Empty: no CORS headers, and a request with an Origin header gets 403
  // (server_security.h).
  std::vector<std::string> allowed_origins;
  // Host names requests may be addressed to besides loopback ones ("*": any); on a loopback bind
  // other Host headers get 403 (DNS rebinding, server_security.h).
  std::vector<std::string> allowed_hosts;
  std::string served_model_name;  // empty: the engine's served_model_name, else the model's name
  int64_t max_body_bytes = 32ll << 20;  // larger request bodies get 413
  int32_t max_connections = 2048;       // connections served at once (a thread each)
  int32_t read_timeout_ms = 10000;  // a client silent this long in the middle of a request gets 400
  double shutdown_grace_s = 30.0;   // stop(): how long in-flight requests may run before abort
  bool log_requests = true;         // one info line per request (the callback gets them anyway)
};

// Counters since start, for status displays.
struct ServerStats {
  int64_t requests_total = 0;      // generation requests received
  int64_t requests_rejected = 0;   // answered with an error before generating
  int64_t requests_in_flight = 0;  // generating now
  int64_t client_disconnects = 0;  // aborted because the client went away
  int32_t open_connections = 0;
};

class ApiServer {
 public:
  // Binds host:port and starts serving on background threads; returns at once. Errors: the port
  // is in use, the host cannot be bound, the config is invalid.
  static Result<std::unique_ptr<ApiServer>> start(Engine& engine, const ServerConfig& config);
  virtual ~ApiServer() = default;  // implementations stop() in their destructor

  // Graceful stop: new requests get 503, in-flight ones get up to `grace` to finish, then are
  // aborted (streams end with finish_reason "abort"), then every connection is closed and the
  // threads joined. Blocks for at most grace + about one second. Idempotent; any thread except a
  // request-log callback.
  virtual void stop(std::chrono::milliseconds grace) = 0;
  void stop();  // with config.shutdown_grace_s

  virtual std::string url() const = 0;  // "http://127.0.0.1:8000" (the bound port)
  virtual int port() const = 0;
  virtual const std::string& model_name() const = 0;  // the name clients must send as "model"
  virtual ServerStats stats() const = 0;
  virtual bool is_stopping() const = 0;

  // Called once per generation request when it ends (or is rejected), on a connection thread.
  // Must return quickly (re-post to your own thread) and not call stop(). nullptr removes it.
  virtual void set_request_log_callback(RequestLogCallback callback) = 0;

 protected:
  virtual double default_grace_s() const = 0;
};

}  // namespace lathe
