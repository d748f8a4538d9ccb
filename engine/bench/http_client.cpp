#include "engine/bench/http_client.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "engine/core/strings.h"

namespace lathe {
namespace {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

constexpr size_t kMaxHeaderBytes = 1 << 16;

}  // namespace

std::string Url::to_string() const {
  const bool v6 = host.find(':') != std::string::npos;
  return strformat("http://%s%s%s:%d%s", v6 ? "[" : "", host.c_str(), v6 ? "]" : "", port,
                   base_path.c_str());
}

Result<Url> parse_url(const std::string& text) {
  std::string s(trim(text));
  Url url;
  if (starts_with(s, "https://"))
    return unsupported("'" + text +
                       "': https is not supported by Lathe's HTTP client; use http:// (for example "
                       "through a local TLS-terminating proxy)");
  if (starts_with(s, "http://"))
    s = s.substr(7);
  else if (s.find("://") != std::string::npos)
    return invalid_argument("'" + text + "': only http:// URLs are supported");
  const size_t slash = s.find('/');
  std::string authority = s.substr(0, slash);
  url.base_path = slash == std::string::npos ? "" : s.substr(slash);
  while (!url.base_path.empty() && url.base_path.back() == '/') url.base_path.pop_back();
  std::string port_text;
  if (starts_with(authority, "[")) {
    const size_t close = authority.find(']');
    if (close == std::string::npos)
      return invalid_argument("'" + text + "': unbalanced [ in the host");
    url.host = authority.substr(1, close - 1);
    if (close + 1 < authority.size() && authority[close + 1] == ':')
      port_text = authority.substr(close + 2);
  } else {
    const size_t colon = authority.rfind(':');
    url.host = authority.substr(0, colon);
    if (colon != std::string::npos) port_text = authority.substr(colon + 1);
  }
  if (url.host.empty())
    return invalid_argument("'" + text + "': no host; write it like http://127.0.0.1:8000");
  if (!port_text.empty()) {
    char* end = nullptr;
    const long p = std::strtol(port_text.c_str(), &end, 10);
    if (*end != '\0' || p <= 0 || p > 65535)
      return invalid_argument("'" + text + "': bad port '" + port_text + "'");
    url.port = static_cast<int>(p);
  }
  return url;
}

std::string HttpClientResponse::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (iequals(k, name)) return v;
  return {};
}

Result<std::unique_ptr<HttpConnection>> HttpConnection::connect(const Url& url,
                                                                int32_t timeout_ms) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(url.port);
  if (const int rc = getaddrinfo(url.host.c_str(), port.c_str(), &hints, &res); rc != 0)
    return io_error(strformat("cannot resolve %s: %s", url.host.c_str(), gai_strerror(rc)));
  std::string last_error = "no address";
  const int64_t deadline = now_ms() + timeout_ms;
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      const int wait = static_cast<int>(std::max<int64_t>(0, deadline - now_ms()));
      rc = poll(&p, 1, wait) == 1 ? 0 : -1;
      int err = rc == 0 ? 0 : ETIMEDOUT;
      socklen_t len = sizeof(err);
      if (rc == 0) getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        errno = err;
        rc = -1;
      }
    }
    if (rc == 0) {
      freeaddrinfo(res);
      return std::unique_ptr<HttpConnection>(new HttpConnection(fd, url));
    }
    last_error = std::strerror(errno);
    ::close(fd);
  }
  freeaddrinfo(res);
  return io_error(
      strformat("cannot connect to %s: %s", url.to_string().c_str(), last_error.c_str()));
}

HttpConnection::~HttpConnection() {
  close();
}

void HttpConnection::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void HttpConnection::shutdown_write() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_WR);
}

Status HttpConnection::send_raw(std::string_view bytes, int32_t timeout_ms) {
  if (fd_ < 0) return io_error("the connection is closed");
  const int64_t deadline = now_ms() + timeout_ms;
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return io_error(
          strformat("sending to %s failed: %s", url_.to_string().c_str(), std::strerror(errno)));
    pollfd p{fd_, POLLOUT, 0};
    const int64_t left = deadline - now_ms();
    if (left <= 0 || poll(&p, 1, static_cast<int>(left)) <= 0)
      return io_error("sending to " + url_.to_string() + " timed out");
  }
  return Status();
}

Status HttpConnection::fill(int64_t deadline_ms, bool* eof) {
  *eof = false;
  if (fd_ < 0) return io_error("the connection is closed");
  if (pos_ > 0 && pos_ == buf_.size()) {
    buf_.clear();
    pos_ = 0;
  } else if (pos_ > (1 << 20)) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  char tmp[65536];
  for (;;) {
    const ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
    if (n > 0) {
      buf_.append(tmp, static_cast<size_t>(n));
      return Status();
    }
    if (n == 0) {
      *eof = true;
      return Status();
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return io_error(
          strformat("reading from %s failed: %s", url_.to_string().c_str(), std::strerror(errno)));
    pollfd p{fd_, POLLIN, 0};
    const int64_t left = deadline_ms - now_ms();
    if (left <= 0 || poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1 << 30))) == 0)
      return io_error("no response from " + url_.to_string() + " before the timeout");
  }
}

Status HttpConnection::read_line(std::string* line, int64_t deadline_ms) {
  for (;;) {
    const size_t nl = buf_.find('\n', pos_);
    if (nl != std::string::npos) {
      size_t end = nl;
      if (end > pos_ && buf_[end - 1] == '\r') --end;
      line->assign(buf_, pos_, end - pos_);
      pos_ = nl + 1;
      return Status();
    }
    if (buf_.size() - pos_ > kMaxHeaderBytes)
      return io_error("the response has an over-long header line");
    bool eof = false;
    LATHE_RETURN_IF_ERROR(fill(deadline_ms, &eof));
    if (eof) return io_error("the server closed the connection before a complete response");
  }
}

Result<HttpClientResponse> HttpConnection::read_response(const std::string& method,
                                                         int32_t timeout_ms,
                                                         const BodyCallback& on_body) {
  const int64_t start = now_ms();
  auto deadline = [&] { return now_ms() + timeout_ms; };  // the limit between two pieces
  HttpClientResponse res;
  std::string line;
  for (;;) {  // skip 1xx interim responses
    LATHE_RETURN_IF_ERROR(read_line(&line, start + timeout_ms));
    if (!starts_with(line, "HTTP/1.") || line.size() < 12)
      return io_error("not an HTTP response from " + url_.to_string() + ": '" + line.substr(0, 80) +
                      "'");
    res.status = std::atoi(line.c_str() + 9);
    const bool http11 = starts_with(line, "HTTP/1.1");
    res.headers.clear();
    for (;;) {
      LATHE_RETURN_IF_ERROR(read_line(&line, start + timeout_ms));
      if (line.empty()) break;
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      res.headers.emplace_back(line.substr(0, colon),
                               std::string(trim(std::string_view(line).substr(colon + 1))));
    }
    res.keep_alive = http11 ? !iequals(res.header("Connection"), "close")
                            : iequals(res.header("Connection"), "keep-alive");
    if (res.status >= 200 || res.status < 100) break;
  }

  bool stopped = false;
  auto deliver = [&](std::string_view piece) {
    if (piece.empty() || stopped) return;
    if (on_body) {
      if (!on_body(piece)) stopped = true;
    } else {
      res.body.append(piece);
    }
  };
  auto finish_stopped = [&]() -> Result<HttpClientResponse> {
    close();
    res.keep_alive = false;
    return res;
  };

  if (method == "HEAD" || res.status == 204 || res.status == 304) return res;
  bool eof = false;
  if (res.header("Transfer-Encoding").find("chunked") != std::string::npos) {
    for (;;) {
      LATHE_RETURN_IF_ERROR(read_line(&line, deadline()));
      char* end = nullptr;
      const unsigned long long size = std::strtoull(line.c_str(), &end, 16);
      if (end == line.c_str()) return io_error("malformed chunk size '" + line.substr(0, 40) + "'");
      if (size == 0) {
        do {
          LATHE_RETURN_IF_ERROR(read_line(&line, deadline()));
        } while (!line.empty());
        break;
      }
      uint64_t left = size;
      while (left > 0) {
        if (pos_ == buf_.size()) {
          LATHE_RETURN_IF_ERROR(fill(deadline(), &eof));
          if (eof) return io_error("the server closed the connection inside a chunk");
        }
        const size_t take = static_cast<size_t>(std::min<uint64_t>(left, buf_.size() - pos_));
        deliver(std::string_view(buf_).substr(pos_, take));
        pos_ += take;
        left -= take;
        if (stopped) return finish_stopped();
      }
      LATHE_RETURN_IF_ERROR(read_line(&line, deadline()));  // the CRLF after the chunk
    }
  } else if (const std::string cl = res.header("Content-Length"); !cl.empty()) {
    uint64_t left = std::strtoull(cl.c_str(), nullptr, 10);
    while (left > 0) {
      if (pos_ == buf_.size()) {
        LATHE_RETURN_IF_ERROR(fill(deadline(), &eof));
        if (eof) return io_error("the server closed the connection before the end of the body");
      }
      const size_t take = static_cast<size_t>(std::min<uint64_t>(left, buf_.size() - pos_));
      deliver(std::string_view(buf_).substr(pos_, take));
      pos_ += take;
      left -= take;
      if (stopped) return finish_stopped();
    }
  } else {
    // No framing: the body runs to the end of the connection.
    for (;;) {
      if (pos_ < buf_.size()) {
        deliver(std::string_view(buf_).substr(pos_));
        pos_ = buf_.size();
        if (stopped) return finish_stopped();
      }
      LATHE_RETURN_IF_ERROR(fill(deadline(), &eof));
      if (eof) break;
    }
    res.keep_alive = false;
  }
  if (!res.keep_alive) close();
  return res;
}

Result<HttpClientResponse> HttpConnection::request(const HttpClientRequest& req,
                                                   const BodyCallback& on_body) {
  std::string head = req.method + " " + url_.base_path + req.path + " HTTP/1.1\r\n";
  const bool v6 = url_.host.find(':') != std::string::npos;
  // The URL's host and port, unless the caller names another Host.
  const bool has_host = std::any_of(req.headers.begin(), req.headers.end(),
                                    [](const auto& h) { return iequals(h.first, "Host"); });
  if (!has_host)
    head += strformat("Host: %s%s%s:%d\r\n", v6 ? "[" : "", url_.host.c_str(), v6 ? "]" : "",
                      url_.port);
  bool has_accept = false;
  for (const auto& [k, v] : req.headers) {
    head += k + ": " + v + "\r\n";
    has_accept |= iequals(k, "Accept");
  }
  if (!has_accept) head += "Accept: */*\r\n";
  if (!req.body.empty() || req.method == "POST" || req.method == "PUT" || req.method == "PATCH")
    head += "Content-Length: " + std::to_string(req.body.size()) + "\r\n";
  head += "Connection: keep-alive\r\n\r\n";
  head += req.body;
  LATHE_RETURN_IF_ERROR(send_raw(head, req.timeout_ms));
  return read_response(req.method, req.timeout_ms, on_body);
}

Result<HttpClientResponse> http_request(const Url& url, const HttpClientRequest& req,
                                        const BodyCallback& on_body) {
  LATHE_ASSIGN_OR_RETURN(std::unique_ptr<HttpConnection> conn,
                         HttpConnection::connect(url, req.connect_timeout_ms));
  return conn->request(req, on_body);
}

}  // namespace lathe
