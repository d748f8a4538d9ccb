// HttpServer on cpp-httplib 0.11 (Debian 12's build: compiled library, poll(),
// OpenSSL/zlib/brotli). The one file that includes httplib.h. What it adds to the library:
//  - a thread per open connection (ElasticTaskQueue), so 300+ streams and /health never queue
//    behind one another; the library's pool is fixed at compile time;
//  - a deep listen backlog (the library's is 5, which drops bursts of connections);
//  - SO_REUSEADDR instead of the library's SO_REUSEPORT, so a second server on the same port
//    fails instead of silently sharing it;
//  - client liveness for handlers and a stop() that ends idle keep-alive connections at once.
//    cpp-httplib 0.11 hands handlers no socket, so both find a connection's socket by its
//    addresses in /proc/self/fd (Linux); elsewhere clients count as alive until a write fails.
#include "engine/server/http_server.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "engine/core/log.h"
#include "engine/core/strings.h"

namespace lathe {

std::string HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (iequals(k, name)) return v;
  return {};
}

bool HttpRequest::has_header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (iequals(k, name)) return true;
  return false;
}

namespace {

// Runs each connection on its own thread: grows up to max_threads (then queues), and never
// shrinks while serving. Idle threads wait on a condition variable.
class ElasticTaskQueue final : public httplib::TaskQueue {
 public:
  ElasticTaskQueue(int max_threads, std::atomic<int>* busy)
      : max_threads_(max_threads), busy_(busy) {}

  void enqueue(std::function<void()> fn) override {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(std::move(fn));
    if (idle_ < static_cast<int>(jobs_.size()) &&
        static_cast<int>(threads_.size()) < max_threads_) {
      try {
        threads_.emplace_back([this] { worker(); });
      } catch (const std::exception& e) {
        // Out of threads: the job waits for a busy one.
        log_warning(std::string("http: cannot start a connection thread: ") + e.what());
      }
    }
    cv_.notify_one();
  }

  // Runs what is queued, then joins every thread.
  void shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

 private:
  void worker() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      ++idle_;
      cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
      --idle_;
      if (jobs_.empty()) return;
      std::function<void()> fn = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      busy_->fetch_add(1);
      fn();
      busy_->fetch_sub(1);
      lock.lock();
    }
  }

  const int max_threads_;
  std::atomic<int>* busy_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  int idle_ = 0;
  bool stop_ = false;
};

// Gives access to the listening socket, which the library keeps protected.
class ServerWithSocket : public httplib::Server {
 public:
  int listen_socket() const { return static_cast<int>(svr_sock_); }
};

// Port and numeric host of a socket's local (peer = false) or remote end.
bool port_of(int fd, bool peer, sockaddr_storage* addr, socklen_t* len, int* port) {
  *len = sizeof(*addr);
  const int rc = peer ? getpeername(fd, reinterpret_cast<sockaddr*>(addr), len)
                      : getsockname(fd, reinterpret_cast<sockaddr*>(addr), len);
  if (rc != 0) return false;
  if (addr->ss_family == AF_INET)
    *port = ntohs(reinterpret_cast<sockaddr_in*>(addr)->sin_port);
  else if (addr->ss_family == AF_INET6)
    *port = ntohs(reinterpret_cast<sockaddr_in6*>(addr)->sin6_port);
  else
    return false;
  return true;
}

std::string host_of(const sockaddr_storage& addr, socklen_t len) {
  char host[NI_MAXHOST];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host, sizeof(host), nullptr, 0,
                  NI_NUMERICHOST) != 0)
    return {};
  return host;
}

// Calls fn(fd) for every socket this process has open (Linux /proc) until fn returns true.
template <typename Fn>
bool for_each_socket(Fn&& fn) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return false;
  const int dir_fd = dirfd(dir);
  while (dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == dir_fd) continue;
    struct stat st {};
    if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    if (fn(static_cast<int>(fd))) break;
  }
  closedir(dir);
  return true;
}

// Whether `fd` is the server side of the connection (local port, remote address and port).
bool is_connection(int fd, int local_port, int remote_port, const std::string& remote_addr) {
  sockaddr_storage addr{};
  socklen_t len = 0;
  int port = -1;
  if (!port_of(fd, false, &addr, &len, &port) || port != local_port) return false;
  if (!port_of(fd, true, &addr, &len, &port) || port != remote_port) return false;
  return host_of(addr, len) == remote_addr;
}

// The socket of the connection a request arrived on, or -1. Only meaningful on the thread serving
// that connection (which owns the socket until the handler returns).
int connection_socket(int local_port, int remote_port, const std::string& remote_addr) {
  thread_local int cached_fd = -1;
  if (cached_fd >= 0 && is_connection(cached_fd, local_port, remote_port, remote_addr))
    return cached_fd;
  cached_fd = -1;
  for_each_socket([&](int fd) {
    if (!is_connection(fd, local_port, remote_port, remote_addr)) return false;
    cached_fd = fd;
    return true;
  });
  return cached_fd;
}

// False once the peer has closed (or reset) the connection. Does not consume data.
bool socket_alive(int fd) {
  pollfd p{fd, static_cast<short>(POLLIN | POLLRDHUP), 0};
  const int rc = poll(&p, 1, 0);
  if (rc < 0) return errno == EINTR;
  if (rc == 0) return true;
  if (p.revents & (POLLHUP | POLLERR | POLLRDHUP | POLLNVAL)) return false;
  char c;
  const ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR));
}

class SinkStream final : public ResponseStream {
 public:
  explicit SinkStream(httplib::DataSink& sink) : sink_(sink) {}
  bool write(std::string_view data) override {
    if (!ok_) return false;
    if (data.empty()) return true;  // an empty chunk would end the chunked body
    ok_ = sink_.write(data.data(), data.size());
    return ok_;
  }
  bool client_alive() override {
    if (ok_ && !sink_.is_writable()) ok_ = false;
    return ok_;
  }
  bool ok() const { return ok_; }

 private:
  httplib::DataSink& sink_;
  bool ok_ = true;
};

class HttplibServer final : public HttpServer {
 public:
  explicit HttplibServer(const HttpServerConfig& config) : config_(config) {}
  ~HttplibServer() override { stop(); }

  Status bind() {
    svr_.set_socket_options([](socket_t sock) {
      int yes = 1;
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    });
    svr_.set_tcp_nodelay(true);  // SSE chunks are small: no Nagle delay between tokens
    svr_.set_read_timeout(config_.read_timeout_ms / 1000, (config_.read_timeout_ms % 1000) * 1000);
    svr_.set_write_timeout(30, 0);
    svr_.set_keep_alive_timeout(config_.keep_alive_timeout_s);
    svr_.set_keep_alive_max_count(1000);
    svr_.set_payload_max_length(static_cast<size_t>(config_.max_body_bytes));
    svr_.new_task_queue = [this] { return new ElasticTaskQueue(config_.max_connections, &busy_); };
    install_handlers();

    int port = config_.port;
    if (port == 0) {
      port = svr_.bind_to_any_port(config_.host);
      if (port <= 0) return bind_error();
    } else if (!svr_.bind_to_port(config_.host, port)) {
      return bind_error();
    }
    port_ = port;
    // Re-listen with a deep backlog: Linux updates the queue length of a listening socket.
    ::listen(svr_.listen_socket(), config_.listen_backlog);
    return Status();
  }

  void add_route(const std::string& method, const std::string& path, HttpHandler handler) override {
    routes_[path][method] = std::move(handler);
  }
  void set_error_responder(HttpErrorResponder responder) override {
    error_responder_ = std::move(responder);
  }

  Status start() override {
    if (thread_.joinable()) return invalid_argument("the HTTP server is already running");
    thread_ = std::thread([this] { svr_.listen_after_bind(); });
    // listen_after_bind() marks the server running before it accepts; wait for that so a stop()
    // right after start() is not lost.
    for (int i = 0; i < 2000 && !svr_.is_running(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return Status();
  }

  void stop() override {
    std::lock_guard<std::mutex> lock(stop_mutex_);
    if (!thread_.joinable()) return;
    // Responses being written (a stream's last chunk, a body) finish first, within a bound.
    {
      std::unique_lock<std::mutex> l(tracked_mutex_);
      tracked_cv_.wait_for(l, std::chrono::seconds(5), [&] { return tracked_.empty(); });
    }
    svr_.stop();  // closes the listener; streams and keep-alive loops see the server stopping
    // Connections idling in keep-alive would otherwise hold their threads for up to the
    // keep-alive timeout: end them now (shutdown() only; their threads close the sockets).
    for_each_socket([&](int fd) {
      sockaddr_storage addr{};
      socklen_t len = 0;
      int local = -1, peer = -1;
      if (port_of(fd, false, &addr, &len, &local) && local == port_ &&
          port_of(fd, true, &addr, &len, &peer))
        ::shutdown(fd, SHUT_RDWR);
      return false;
    });
    thread_.join();
  }

  const std::string& host() const override { return config_.host; }
  int port() const override { return port_; }
  int open_connections() const override { return busy_.load(); }

 private:
  Status bind_error() {
    const int err = errno;
    if (err == EADDRINUSE)
      return io_error(
          strformat("cannot listen on %s:%d: the port is already in use; stop the other "
                    "server or pass another --port",
                    config_.host.c_str(), config_.port));
    return io_error(strformat("cannot listen on %s:%d: %s; check --host and --port",
                              config_.host.c_str(), config_.port,
                              err != 0 ? std::strerror(err) : "bad address"));
  }

  HttpResponse library_error(int status, const std::string& message) const {
    if (error_responder_) return error_responder_(status, message);
    HttpResponse r;
    r.status = status;
    r.content_type = "text/plain";
    r.body = message;
    return r;
  }

  static void apply(HttpResponse&& r, httplib::Response& res) {
    res.status = r.status;
    for (auto& [k, v] : r.headers) res.set_header(k, v);
    if (r.close_connection) res.set_header("Connection", "close");
    if (r.stream) {
      auto fn = std::make_shared<std::function<void(ResponseStream&)>>(std::move(r.stream));
      res.set_chunked_content_provider(r.content_type, [fn](size_t, httplib::DataSink& sink) {
        SinkStream stream(sink);
        (*fn)(stream);
        if (!stream.ok()) return false;
        sink.done();
        return true;
      });
    } else {
      res.set_content(r.body, r.content_type);
    }
  }

  static HttpRequest convert(const httplib::Request& req) {
    HttpRequest r;
    r.method = req.method;
    r.path = req.path;
    r.headers.reserve(req.headers.size());
    for (const auto& [k, v] : req.headers) {
      if (k == "REMOTE_ADDR" || k == "REMOTE_PORT" || k == "LOCAL_ADDR" || k == "LOCAL_PORT")
        continue;
      r.headers.emplace_back(k, v);
    }
    r.remote_addr = req.remote_addr;
    r.remote_port = req.remote_port;
    // Looked up on first use only: most handlers never ask.
    r.client_alive = [fd = -2, local = req.local_port, remote = req.remote_port,
                      addr = req.remote_addr]() mutable {
      if (fd == -2) fd = connection_socket(local, remote, addr);
      return fd < 0 || socket_alive(fd);
    };
    return r;
  }

  // Finds the handler for the request, or answers 404 / 405.
  const HttpHandler* find(const std::string& method, const std::string& path,
                          HttpResponse* error) const {
    auto it = routes_.find(path);
    if (it == routes_.end()) {
      *error = library_error(
          404, strformat("Invalid URL (%s %s): no such route", method.c_str(), path.c_str()));
      return nullptr;
    }
    const std::string m = method == "HEAD" ? "GET" : method;
    auto h = it->second.find(m);
    if (h == it->second.end()) {
      std::string allowed;
      for (const auto& [name, handler] : it->second)
        allowed += (allowed.empty() ? "" : ", ") + name;
      *error = library_error(405, strformat("%s %s: method not allowed; use %s", method.c_str(),
                                            path.c_str(), allowed.c_str()));
      error->headers.emplace_back("Allow", allowed);
      return nullptr;
    }
    return &h->second;
  }

  void serve(HttpRequest&& request, httplib::Response& res) const {
    HttpResponse error;
    const HttpHandler* handler = find(request.method, request.path, &error);
    if (handler == nullptr) return apply(std::move(error), res);
    HttpResponse response;
    try {
      response = (*handler)(request);
    } catch (const std::exception& e) {
      log_error(std::string("http: a handler threw (a bug): ") + e.what());
      response = library_error(500, "internal server error");
    } catch (...) {
      log_error("http: a handler threw (a bug)");
      response = library_error(500, "internal server error");
    }
    apply(std::move(response), res);
  }

  // A request is tracked from its handler's start until the library has written the whole
  // response (the logger runs then), so that stop() does not cut a response short.
  void track(const httplib::Request& req) {
    std::lock_guard<std::mutex> l(tracked_mutex_);
    tracked_.insert(&req);
  }
  void untrack(const httplib::Request& req) {
    std::lock_guard<std::mutex> l(tracked_mutex_);
    if (tracked_.erase(&req) > 0 && tracked_.empty()) tracked_cv_.notify_all();
  }

  void install_handlers() {
    svr_.set_logger(
        [this](const httplib::Request& req, const httplib::Response&) { untrack(req); });
    // Every method goes through our exact-path table (routes are registered in one place).
    auto without_body = [this](const httplib::Request& req, httplib::Response& res) {
      track(req);
      serve(convert(req), res);
    };
    auto with_body = [this](const httplib::Request& req, httplib::Response& res,
                            const httplib::ContentReader& reader) {
      track(req);
      std::string body;
      bool too_large = false;
      const size_t limit = static_cast<size_t>(config_.max_body_bytes);
      // An oversized chunked body is read on and dropped (up to a bound) so the client, still
      // sending, gets the 413 instead of a reset connection.
      const size_t drain_limit = std::max<size_t>(limit * 4, size_t{64} << 20);
      size_t received = 0;
      const bool ok = reader([&](const char* data, size_t n) {
        received += n;
        if (too_large || body.size() + n > limit) {
          too_large = true;
          body.clear();
          return received <= drain_limit;
        }
        body.append(data, n);
        return true;
      });
      if (!ok || too_large) {
        HttpResponse r;
        if (too_large || res.status == 413) {
          r = library_error(413, strformat("the request body is larger than the server's limit "
                                           "of %s",
                                           format_bytes(static_cast<double>(limit)).c_str()));
        } else {
          r = library_error(400,
                            "could not read the request body: the connection ended or "
                            "stalled before Content-Length bytes arrived");
        }
        r.close_connection = true;
        return apply(std::move(r), res);
      }
      HttpRequest request = convert(req);
      request.body = std::move(body);
      serve(std::move(request), res);
    };
    const std::string any = R"(/.*)";
    svr_.Get(any, without_body);
    svr_.Options(any, without_body);
    svr_.Post(any, with_body);
    svr_.Put(any, with_body);
    svr_.Patch(any, with_body);
    svr_.Delete(any, with_body);

    // A body must come with a length (or chunked framing); otherwise the library would read until
    // the client closes, without a limit.
    svr_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      const bool has_body_method = req.method == "POST" || req.method == "PUT" ||
                                   req.method == "PATCH" || req.method == "DELETE";
      if (!has_body_method || req.has_header("Content-Length") ||
          req.get_header_value("Transfer-Encoding").find("chunked") != std::string::npos)
        return httplib::Server::HandlerResponse::Unhandled;
      HttpResponse r = library_error(411,
                                     "the request has no Content-Length header; send the "
                                     "JSON body with its length");
      r.close_connection = true;
      apply(std::move(r), res);
      return httplib::Server::HandlerResponse::Handled;
    });
    // Errors the library produces itself (malformed request line, header too long, ...) get the
    // same body shape as ours.
    svr_.set_error_handler(httplib::Server::HandlerWithResponse(
        [this](const httplib::Request&, httplib::Response& res) {
          if (!res.body.empty() || res.content_provider_)
            return httplib::Server::HandlerResponse::Unhandled;
          std::string message =
              strformat("the server could not handle the request (HTTP %d)", res.status);
          if (res.status == 400) message = "malformed HTTP request";
          if (res.status == 416) message = "the Range header is not satisfiable";
          if (res.status == 413) message = "the request body is larger than the server's limit";
          if (res.status == 414) message = "the request URI is too long";
          HttpResponse r = library_error(res.status, message);
          for (auto& [k, v] : r.headers) res.set_header(k, v);
          res.set_content(r.body, r.content_type);
          return httplib::Server::HandlerResponse::Handled;
        }));
    svr_.set_exception_handler(
        [this](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
          apply(library_error(500, "internal server error"), res);
        });
  }

  HttpServerConfig config_;
  ServerWithSocket svr_;
  std::map<std::string, std::map<std::string, HttpHandler>> routes_;  // path -> method -> handler
  HttpErrorResponder error_responder_;
  std::atomic<int> busy_{0};
  std::mutex tracked_mutex_;
  std::condition_variable tracked_cv_;
  std::set<const httplib::Request*> tracked_;
  std::thread thread_;
  std::mutex stop_mutex_;
  int port_ = 0;
};

}  // namespace

Result<std::unique_ptr<HttpServer>> HttpServer::create(const HttpServerConfig& config) {
  if (config.port < 0 || config.port > 65535)
    return invalid_argument(strformat("--port must be in [0, 65535], got %d", config.port));
  if (config.max_body_bytes <= 0) return invalid_argument("the request body limit must be > 0");
  if (config.max_connections <= 0) return invalid_argument("max_connections must be > 0");
  auto server = std::make_unique<HttplibServer>(config);
  LATHE_RETURN_IF_ERROR(server->bind());
  return std::unique_ptr<HttpServer>(std::move(server));
}

}  // namespace lathe
