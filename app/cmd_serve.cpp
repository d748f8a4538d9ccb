// `lathe serve [MODEL]`: the OpenAI-compatible HTTP server (vLLM's flag names where they exist).
// Loads the model, starts the server, logs the URL, model and KV plan, then serves until SIGINT or
// SIGTERM: new requests get 503, in-flight ones get --shutdown-timeout seconds to finish (then are
// aborted), and the process exits 0. A second signal exits at once.
#include <CLI/CLI.hpp>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>

#include "app/commands.h"
#include "app/engine_flags.h"
#include "engine/core/log.h"
#include "engine/core/strings.h"
#include "engine/runtime/engine.h"
#include "engine/server/api_server.h"
#include "engine/server/server_security.h"

namespace lathe::cli {
namespace {

struct ServeFlags {
  std::string model_positional;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key;
  std::vector<std::string> allowed_origins;
  std::vector<std::string> allowed_hosts;
  std::string served_model_name;
  std::string max_body_size = "32MiB";
  int max_waiting_requests = 4096;
  int max_connections = 2048;
  double shutdown_timeout_s = 10.0;
  bool disable_log_requests = false;
};

// Signals arrive on any thread; the handler only writes a byte to a pipe the main thread reads.
int g_signal_pipe[2] = {-1, -1};
std::atomic<int> g_signals{0};

void on_signal(int sig) {
  if (g_signals.fetch_add(1) > 0) _exit(128 + sig);  // a second Ctrl-C: stop now
  const char c = static_cast<char>(sig);
  const ssize_t n = write(g_signal_pipe[1], &c, 1);
  (void)n;
}

int install_signal_handlers() {
  if (pipe2(g_signal_pipe, O_CLOEXEC) != 0) return -1;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  return 0;
}

int wait_for_signal() {
  char c = 0;
  for (;;) {
    const ssize_t n = read(g_signal_pipe[0], &c, 1);
    if (n == 1) return c;
    if (n < 0 && errno == EINTR) continue;
    return 0;
  }
}

std::string default_served_name(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const size_t slash = path.find_last_of('/');
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (ends_with(name, ".gguf")) name.resize(name.size() - 5);
  return name;
}

int run_serve(EngineFlags& engine_flags, const ServeFlags& f) {
  if (!f.model_positional.empty()) {
    if (!engine_flags.model.empty() && engine_flags.model != f.model_positional) {
      log_error("give the model once: either as MODEL or with -m/--model");
      return 2;
    }
    engine_flags.model = f.model_positional;
  }
  Result<EngineConfig> config = resolve_engine_flags(engine_flags);
  if (!config.is_ok()) {
    log_error(config.status().message());
    return 2;
  }
  Result<std::string> path = resolve_model_path(config->model_path);
  if (!path.is_ok()) {
    log_error(path.status().message());
    return 2;
  }
  config->model_path = path.value();
  // As vLLM names a model after what was passed: the file or folder name (without .gguf).
  config->served_model_name =
      f.served_model_name.empty() ? default_served_name(path.value()) : f.served_model_name;
  if (f.max_waiting_requests < 1) {
    log_error("--max-waiting-requests must be >= 1");
    return 2;
  }
  config->scheduler.max_waiting_requests = f.max_waiting_requests;
  const int64_t body_limit = parse_byte_size(f.max_body_size);
  if (body_limit <= 0) {
    log_error("--max-body-size: cannot read '" + f.max_body_size +
              "' as a size; write it like 32MiB");
    return 2;
  }

  log_info("loading " + config->model_path);
  Result<std::unique_ptr<Engine>> engine = Engine::create(config.value());
  if (!engine.is_ok()) {
    log_error(engine.status().message());
    return 1;
  }

  ServerConfig sc;
  sc.host = f.host;
  sc.port = f.port;
  sc.api_key = f.api_key;
  sc.allowed_origins = f.allowed_origins;
  sc.allowed_hosts = f.allowed_hosts;
  sc.served_model_name = config->served_model_name;
  sc.max_body_bytes = body_limit;
  sc.max_connections = f.max_connections;
  sc.shutdown_grace_s = f.shutdown_timeout_s;
  sc.log_requests = !f.disable_log_requests;
  if (install_signal_handlers() != 0) {
    log_error("cannot set up signal handling");
    return 1;
  }
  Result<std::unique_ptr<ApiServer>> server = ApiServer::start(*engine.value(), sc);
  if (!server.is_ok()) {
    log_error(server.status().message());
    return 1;
  }
  const Engine& e = *engine.value();
  // (The engine logged the KV plan when it loaded.)
  log_info(strformat("model: %s (%s), max-model-len %d, max-num-seqs %d",
                     server.value()->model_name().c_str(), e.model().path.c_str(),
                     e.config().scheduler.max_model_len, e.config().scheduler.max_num_seqs));
  if (const std::string warning = exposure_warning(sc); !warning.empty()) log_warning(warning);
  log_info("serving the OpenAI API at " + server.value()->url() + "/v1 (Ctrl-C stops)");

  const int sig = wait_for_signal();
  log_info(
      strformat("received %s: stopping (in-flight requests get %.0f s; Ctrl-C again to exit now)",
                sig == SIGTERM ? "SIGTERM" : "SIGINT", f.shutdown_timeout_s));
  server.value()->stop();
  server.value().reset();
  engine.value()->shutdown();
  return 0;
}

}  // namespace

void register_serve(CLI::App& app, int* exit_code) {
  auto engine_flags = std::make_shared<EngineFlags>();
  auto flags = std::make_shared<ServeFlags>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve a model over an OpenAI-compatible HTTP API");
  cmd->add_option("model", flags->model_positional,
                  "GGUF file or Hugging Face model folder (default: the SmolLM2-135M-Instruct Q4_1 "
                  "in the model cache)");
  add_engine_flags(*cmd, *engine_flags, /*with_model_option=*/true);
  cmd->add_option("--host", flags->host, "address to listen on (0.0.0.0: every interface)")
      ->capture_default_str();
  cmd->add_option("--port", flags->port, "TCP port (0: any free port)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd->add_option("--api-key", flags->api_key,
                  "require 'Authorization: Bearer KEY' on /v1/*, /tokenize and /detokenize")
      ->envname("LATHE_API_KEY");
  cmd->add_option("--allowed-origins", flags->allowed_origins,
                  "origins whose web pages may call the API (CORS), e.g. http://localhost:3000, "
                  "or '*'; by default requests from web pages get 403")
      ->delimiter(',');
  cmd->add_option("--allowed-hosts", flags->allowed_hosts,
                  "host names requests may be addressed to besides localhost/127.0.0.1/[::1], or "
                  "'*'; on a loopback bind other Host headers get 403 (DNS rebinding)")
      ->delimiter(',');
  cmd->add_option("--served-model-name", flags->served_model_name,
                  "the model name clients send and see (default: the model file or folder name)");
  cmd->add_option("--max-body-size", flags->max_body_size,
                  "largest request body accepted (larger get 413)")
      ->capture_default_str();
  cmd->add_option("--max-waiting-requests", flags->max_waiting_requests,
                  "requests queued beyond the running batch; more get 503 with Retry-After")
      ->capture_default_str();
  cmd->add_option("--max-connections", flags->max_connections, "HTTP connections served at once")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  cmd->add_option("--shutdown-timeout", flags->shutdown_timeout_s,
                  "seconds in-flight requests may run after SIGINT/SIGTERM before they are aborted")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  cmd->add_flag("--disable-log-requests", flags->disable_log_requests,
                "do not log a line per request");
  cmd->callback(
      [engine_flags, flags, exit_code] { *exit_code = run_serve(*engine_flags, *flags); });
}

}  // namespace lathe::cli
