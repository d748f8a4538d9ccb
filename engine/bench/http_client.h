// A small blocking HTTP/1.1 client over POSIX sockets, for the load generator and the server's
// tests: plain http:// only, one request at a time per connection, keep-alive, chunked and
// Content-Length bodies, bodies delivered piece by piece as they arrive (so a caller can time
// every streamed chunk), and raw bytes for tests that must send malformed requests.
//
//   auto url = parse_url("http://127.0.0.1:8000");
//   HttpClientRequest req{.method = "POST", .path = "/v1/completions", .body = json};
//   auto res = http_request(url.value(), req, [&](std::string_view piece) { ...; return true; });
//
// Thread-safety: an HttpConnection belongs to one thread; separate connections are independent.
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

struct Url {
  std::string host;  // "127.0.0.1", "localhost", "::1"
  int port = 80;
  std::string base_path;  // path prefix without a trailing slash ("" or "/api")
  std::string to_string() const;
};

// "http://host[:port][/base]" -> Url. https and other schemes are rejected with an explanation.
Result<Url> parse_url(const std::string& url);

struct HttpClientRequest {
  std::string method = "GET";
  std::string path = "/";                                    // appended to Url::base_path
  std::vector<std::pair<std::string, std::string>> headers;  // Host, Content-Length are added
  std::string body;
  int32_t timeout_ms = 600000;  // the whole exchange; also the limit between two pieces
  int32_t connect_timeout_ms = 10000;
};

struct HttpClientResponse {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;         // the whole body, unless a BodyCallback took it piece by piece
  bool keep_alive = false;  // the connection may carry another request
  std::string header(std::string_view name) const;  // case-insensitive; "" when absent
};

// Receives the decoded body piece by piece, as each read returns. Return false to stop reading
// (the connection is then closed; the response counts as complete so far).
using BodyCallback = std::function<bool(std::string_view piece)>;

class HttpConnection {
 public:
  static Result<std::unique_ptr<HttpConnection>> connect(const Url& url,
                                                         int32_t timeout_ms = 10000);
  ~HttpConnection();
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  // Sends a request (adds Host, Content-Length, Connection: keep-alive) and reads the response.
  Result<HttpClientResponse> request(const HttpClientRequest& req,
                                     const BodyCallback& on_body = nullptr);

  // Raw access for tests: send any bytes, half-close, read whatever response comes back.
  Status send_raw(std::string_view bytes, int32_t timeout_ms = 10000);
  void shutdown_write();
  Result<HttpClientResponse> read_response(const std::string& method, int32_t timeout_ms,
                                           const BodyCallback& on_body = nullptr);
  void close();
  bool is_open() const { return fd_ >= 0; }
  const Url& url() const { return url_; }

 private:
  HttpConnection(int fd, Url url) : fd_(fd), url_(std::move(url)) {}
  // Reads more bytes into buf_; error on timeout or a closed connection (when !allow_eof).
  Status fill(int64_t deadline_ms, bool* eof);
  Status read_line(std::string* line, int64_t deadline_ms);

  int fd_ = -1;
  Url url_;
  std::string buf_;
  size_t pos_ = 0;
};

// One request on a fresh connection.
Result<HttpClientResponse> http_request(const Url& url, const HttpClientRequest& req,
                                        const BodyCallback& on_body = nullptr);

}  // namespace lathe
