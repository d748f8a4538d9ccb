// `lathe generate`: one request through the Engine, its text streamed to stdout as it is produced,
// then one summary line on stderr (prompt tokens, generated tokens, TTFT, decode tokens/s).
// Ctrl-C aborts the request and still prints the summary. Errors: one line, exit code 1.
#include <CLI/CLI.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <mutex>

#include "app/commands.h"
#include "app/engine_flags.h"
#include "engine/core/log.h"
#include "engine/core/strings.h"
#include "engine/runtime/engine.h"

namespace lathe::cli {
namespace {

struct GenerateFlags {
  std::string prompt;
  int max_tokens = 128;
  float temperature = 0.7f;
  float top_p = 1.0f;
  int top_k = 0;
  uint64_t seed = 0;
  bool chat = false;
  std::string system;
  // Set when the flag was given; otherwise the model's generation defaults apply.
  bool temperature_given = false, top_p_given = false, top_k_given = false, seed_given = false;
};

std::atomic<bool> g_interrupted{false};
void on_sigint(int) {
  g_interrupted.store(true);
}

int run_generate(const EngineFlags& ef, const GenerateFlags& f) {
  Result<EngineConfig> config = resolve_engine_flags(ef);
  if (!config.is_ok()) {
    log_error(config.status().message());
    return 1;
  }
  Result<std::unique_ptr<Engine>> created = Engine::create(config.value());
  if (!created.is_ok()) {
    log_error(created.status().message());
    return 1;
  }
  Engine& engine = *created.value();
  const GenerationDefaults& defaults = engine.model().generation;

  RequestSpec spec;
  if (f.chat || !f.system.empty()) {
    if (!f.system.empty()) spec.messages.push_back({"system", f.system});
    spec.messages.push_back({"user", f.prompt});
  } else {
    spec.prompt = f.prompt;
  }
  SamplingParams& s = spec.sampling;
  s.max_tokens = f.max_tokens;
  s.temperature =
      f.temperature_given || defaults.temperature < 0 ? f.temperature : defaults.temperature;
  s.top_p = f.top_p_given || defaults.top_p < 0 ? f.top_p : defaults.top_p;
  s.top_k = f.top_k_given || defaults.top_k < 0 ? f.top_k : defaults.top_k;
  if (f.seed_given) s.seed = f.seed;

  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  StreamEvent last;
  RequestTimeline timeline;
  auto id = engine.submit(spec, [&](const StreamEvent& e) {
    if (!e.text.empty()) {
      std::fwrite(e.text.data(), 1, e.text.size(), stdout);
      std::fflush(stdout);
    }
    if (!e.finished) return;
    std::lock_guard<std::mutex> lock(mu);
    last = e;
    if (e.timeline) timeline = *e.timeline;
    done = true;
    cv.notify_all();
  });
  if (!id.is_ok()) {
    log_error(id.status().message());
    return 1;
  }
  std::signal(SIGINT, on_sigint);
  {
    std::unique_lock<std::mutex> lock(mu);
    bool aborted = false;
    while (!cv.wait_for(lock, std::chrono::milliseconds(50), [&] { return done; })) {
      if (g_interrupted.load() && !aborted) {
        engine.abort(id.value());
        aborted = true;
      }
    }
  }
  std::signal(SIGINT, SIG_DFL);
  std::printf("\n");
  std::fflush(stdout);
  if (last.finish_reason == FinishReason::kError) {
    log_error(last.error);
    return 1;
  }
  const int generated = last.usage.completion_tokens;
  const bool has_first = timeline.first_token != Clock::time_point{};
  const double ttft_ms =
      has_first ? 1000.0 * seconds(timeline.first_token - timeline.arrival) : 0.0;
  const double decode_s = has_first ? seconds(timeline.finished - timeline.first_token) : 0.0;
  const double decode_tps = generated > 1 && decode_s > 0 ? (generated - 1) / decode_s : 0.0;
  std::fprintf(
      stderr,
      "prompt tokens: %d, generated tokens: %d, time to first token: %.1f ms, decode: %.1f "
      "tokens/s (finish: %s)\n",
      last.usage.prompt_tokens, generated, ttft_ms, decode_tps,
      finish_reason_name(last.finish_reason));
  return last.finish_reason == FinishReason::kAbort ? 130 : 0;
}

}  // namespace

void register_generate(CLI::App& app, int* exit_code) {
  auto ef = std::make_shared<EngineFlags>();
  auto f = std::make_shared<GenerateFlags>();
  CLI::App* cmd = app.add_subcommand(
      "generate",
      "Generate text from a prompt, streamed to stdout; a summary line (prompt tokens, generated "
      "tokens, time to first token, decode tokens/s) follows on stderr");
  cmd->add_option("-p,--prompt", f->prompt, "the prompt (with --chat: the user message)")
      ->required();
  cmd->add_option("-n,--max-tokens", f->max_tokens, "tokens to generate at most")
      ->check(CLI::Range(1, 1 << 24))
      ->capture_default_str();
  CLI::Option* t =
      cmd->add_option("--temperature", f->temperature,
                      "sampling temperature; 0 = greedy (default: the model's, else 0.7)");
  CLI::Option* p = cmd->add_option(
      "--top-p", f->top_p, "nucleus sampling mass in (0, 1] (default: the model's, else 1)");
  CLI::Option* k = cmd->add_option("--top-k", f->top_k,
                                   "keep the k most likely tokens; 0 = off (default: the model's)");
  CLI::Option* s = cmd->add_option("--seed", f->seed, "random seed (default: a random one)");
  cmd->add_flag("--chat", f->chat,
                "render the prompt as a user message through the model's chat template");
  cmd->add_option("--system", f->system, "system message (implies --chat)");
  add_engine_flags(*cmd, *ef);
  cmd->callback([=] {
    f->temperature_given = t->count() > 0;
    f->top_p_given = p->count() > 0;
    f->top_k_given = k->count() > 0;
    f->seed_given = s->count() > 0;
    *exit_code = run_generate(*ef, *f);
  });
}

}  // namespace lathe::cli
