// An Engine over the fake model runner (fake_runner.h), for the engine's unit tests: a fake model
// (vocabulary 1000, context 256, EOS 2; optionally a fake tokenizer and a template that joins the
// messages' contents), an engine made from it on the CPU with a given cache and scheduler size,
// and greedy request specs over synthetic prompts.
#pragma once

#include <QtGlobal>

#include <memory>
#include <utility>
#include <vector>

#include "engine/runtime/engine.h"
#include "fake_runner.h"
#include "fake_tokenizer.h"

namespace lathe::test {

inline LoadedModel fake_model(bool with_tokenizer = false) {
  LoadedModel m;
  m.path = "fake";
  m.format = ModelFormat::kDummy;
  m.config.name = "fake";
  m.config.vocab_size = 1000;
  m.config.max_position_embeddings = 256;
  m.generation.eos_token_ids = {2};
  if (with_tokenizer) {
    m.tokenizer = std::make_shared<FakeTokenizer>();
    m.chat_template = "{% for m in messages %}{{ m.content }}{% endfor %}";
  }
  return m;
}

// An engine and the fake runner it owns (the pointer lives as long as the engine).
struct Made {
  std::unique_ptr<Engine> engine;
  FakeModelRunner* runner = nullptr;
};

// An engine on the CPU over a FakeModelRunner(ro): `blocks` KV blocks, at most `seqs` sequences and
// `budget` tokens per step, `max_waiting` queued requests. Aborts the test (qFatal) if it cannot be
// made.
inline Made make_engine(FakeRunnerOptions ro = {}, int blocks = 64, int seqs = 8, int budget = 64,
                        bool with_tokenizer = false, int max_waiting = 4096) {
  EngineConfig c;
  c.device.device = DeviceKind::kCpu;
  c.cache.num_gpu_blocks_override = blocks;
  c.scheduler.max_num_seqs = seqs;
  c.scheduler.max_num_batched_tokens = budget;
  c.scheduler.max_waiting_requests = max_waiting;
  auto runner = std::make_unique<FakeModelRunner>(ro);
  FakeModelRunner* raw = runner.get();
  auto e = Engine::create_with_runner(c, fake_model(with_tokenizer), std::move(runner));
  if (!e.is_ok()) qFatal("%s", e.status().message().c_str());
  return {std::move(e).value(), raw};
}

// A greedy request (temperature 0) for `max_tokens` tokens after `prompt`.
inline RequestSpec spec(std::vector<TokenId> prompt, int max_tokens) {
  RequestSpec s;
  s.prompt_tokens = std::move(prompt);
  s.sampling.temperature = 0.0f;
  s.sampling.max_tokens = max_tokens;
  return s;
}

// A synthetic prompt of n ordinary tokens (ids 3..902, never EOS), different for each seed.
inline std::vector<TokenId> prompt_of(int n, int seed = 0) {
  std::vector<TokenId> p;
  for (int i = 0; i < n; ++i) p.push_back(3 + (seed * 37 + i * 11) % 900);
  return p;
}

}  // namespace lathe::test
