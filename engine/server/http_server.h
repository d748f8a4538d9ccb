// A small HTTP/1.1 server: exact-path routes, bodies capped in size, streamed (chunked) responses,
// a thread per open connection so slow streams never starve quick requests. The only interface
// to cpp-httplib: nothing else in Lathe includes httplib.h.
//
//   auto http = HttpServer::create({.host = "127.0.0.1", .port = 8000});
//   http.value()->add_route("GET", "/health", [](const HttpRequest&) { return HttpResponse{}; });
//   http.value()->start();   // serves on its own threads; returns at once
//   ...
//   http.value()->stop();    // closes the listener and every connection, joins the threads
//
// Handlers run on connection threads, many at once; they must not throw (an escaped exception is
// answered with the error responder's 500, but is a bug).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/core/status.h"

namespace lathe {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // without the query string
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;  // complete body (at most HttpServerConfig::max_body_bytes)
  std::string remote_addr;
  int remote_port = 0;

  // Value of the first header named `name` (case-insensitive), or "" when absent.
  std::string header(std::string_view name) const;
  bool has_header(std::string_view name) const;

  // True while the client keeps its connection open. Cheap (one poll); safe from the handler's
  // thread while the handler runs. Lets a handler that waits for a long result give up early.
  std::function<bool()> client_alive;
};

// What a handler's streamed body writes through. Used only on the handler's connection thread.
class ResponseStream {
 public:
  virtual ~ResponseStream() = default;
  // Sends `data` as one chunk now. False when the client has gone (nothing more will arrive).
  virtual bool write(std::string_view data) = 0;
  // False once the client has closed its connection (checked without writing).
  virtual bool client_alive() = 0;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers (Retry-After, ...)
  // When set, the status and headers go out first and then `stream` runs on the connection's
  // thread, writing the body in chunks (Transfer-Encoding: chunked) until it returns. `body` is
  // ignored.
  std::function<void(ResponseStream&)> stream;
  bool close_connection = false;  // send "Connection: close" and end the connection afterwards
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

// Builds the response for errors found before a handler runs: unknown route (404), wrong method
// (405), body over the limit (413), a POST without a length (411), a malformed request (400), an
// escaped exception (500). `message` says what happened.
using HttpErrorResponder = std::function<HttpResponse(int status, const std::string& message)>;

struct HttpServerConfig {
  std::string host = "127.0.0.1";
  int port = 8000;                      // 0: any free port (see HttpServer::port())
  int64_t max_body_bytes = 32ll << 20;  // request bodies above this get 413
  int32_t max_connections = 2048;       // connections served at once (one thread each)
  int32_t read_timeout_ms = 10000;      // a client silent this long mid-request gets 400
  int32_t keep_alive_timeout_s = 5;     // idle keep-alive connections close after this
  int32_t listen_backlog = 4096;        // pending connections the kernel queues
};

class HttpServer {
 public:
  // Binds the socket (errors: address in use, bad host) but does not serve yet.
  static Result<std::unique_ptr<HttpServer>> create(const HttpServerConfig& config);
  virtual ~HttpServer() = default;

  // Registers `handler` for exact `method` + `path`. Call before start().
  virtual void add_route(const std::string& method, const std::string& path,
                         HttpHandler handler) = 0;
  virtual void set_error_responder(HttpErrorResponder responder) = 0;

  // Starts serving on background threads and returns at once.
  virtual Status start() = 0;
  // Stops accepting, ends every open connection (streams see their client as gone) and joins
  // all threads. Idempotent. Handlers still running finish on their own; stop() waits for them.
  virtual void stop() = 0;

  virtual const std::string& host() const = 0;
  virtual int port() const = 0;  // the bound port (useful with port 0)
  virtual int open_connections() const = 0;
};

}  // namespace lathe
