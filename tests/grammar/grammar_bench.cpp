// lathe_grammar_bench: what constrained decoding adds to a CPU decode step, per step and batch
// size. B requests decode under their own constraint (a JSON schema, compiled per request as the
// server does); each step, per row: the mask lookup (computed on a cache miss), then sampling
// with the mask against sampling the same logits without it. Logits are random, so the walk
// visits more grammar states than a model would (a pessimistic cache hit rate).
//
//   lathe_grammar_bench [--model GGUF] [--batches 1,64] [--steps 64] [--seed 1]
//
// Prints, per batch: schema compile time, the first step (cold caches), and the mean added time
// per step over the rest, as milliseconds and per row.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_schema.h"
#include "engine/grammar/grammar_constraint.h"
#include "engine/grammar/json_schema_regex.h"
#include "engine/model/model_loader.h"
#include "engine/runtime/sampler.h"

using namespace lathe;
using Clock = std::chrono::steady_clock;

namespace {

double ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::string model;
  std::vector<int> batches = {1, 64};
  int steps = 64;
  uint32_t seed = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--model") {
      model = argv[i + 1];
    } else if (k == "--steps") {
      steps = std::atoi(argv[i + 1]);
    } else if (k == "--seed") {
      seed = static_cast<uint32_t>(std::atoi(argv[i + 1]));
    } else if (k == "--batches") {
      batches.clear();
      for (const char* p = argv[i + 1]; *p;) {
        batches.push_back(std::atoi(p));
        while (*p && *p != ',') ++p;
        if (*p == ',') ++p;
      }
    } else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  Result<std::string> path = resolve_model_path(model);
  if (!path.is_ok()) {
    std::fprintf(stderr, "%s\n", path.status().message().c_str());
    return 1;
  }
  Result<LoadedModel> m = load_model(*path);
  if (!m.is_ok() || !m->tokenizer) {
    std::fprintf(stderr, "cannot load the model's tokenizer: %s\n",
                 m.is_ok() ? "none" : m.status().message().c_str());
    return 1;
  }
  const Tokenizer& tok = *m->tokenizer;
  const int64_t vocab = tok.vocab_size();
  auto t0 = Clock::now();
  auto vocabulary = std::make_shared<const TokenVocabulary>(tok);
  auto t1 = Clock::now();
  std::printf("model %s, vocabulary %lld tokens (%zu walkable), built in %.1f ms\n", path->c_str(),
              static_cast<long long>(vocab), vocabulary->size(), ms(t0, t1));
  const std::string regex =
      json_schema_to_regex(nlohmann::ordered_json::parse(bench::kPersonSchema)).value();
  const std::vector<TokenId> end = {tok.eos_id()};

  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 2.f);
  std::vector<float> base(static_cast<size_t>(vocab) * 8);
  for (float& x : base) x = normal(rng);
  std::vector<float> logits(static_cast<size_t>(vocab));

  for (const int b : batches)
    for (const bool shared : {false, true}) {
      auto c0 = Clock::now();
      std::vector<std::shared_ptr<GrammarConstraint>> cs;
      for (int i = 0; i < b; ++i)
        cs.push_back(shared && i > 0 ? cs[0]
                                     : GrammarConstraint::create(regex, vocabulary).value());
      auto c1 = Clock::now();
      std::vector<int32_t> state(static_cast<size_t>(b));
      for (int i = 0; i < b; ++i)
        state[static_cast<size_t>(i)] = cs[static_cast<size_t>(i)]->start();
      double first_ms = 0, rest_ms = 0, mask_ms = 0, apply_ms = 0, plain_ms = 0;
      int restarts = 0;
      for (int step = 0; step < steps; ++step) {
        double step_mask = 0, step_with = 0, step_plain = 0;
        for (int i = 0; i < b; ++i) {
          GrammarConstraint& c = *cs[static_cast<size_t>(i)];
          const float* src = base.data() + static_cast<size_t>((step * 31 + i) % 8) * vocab;
          SamplingRow row;
          row.temperature = 1.0f;
          row.seed = seed + static_cast<uint64_t>(i);
          row.step = static_cast<uint64_t>(step);
          auto a = Clock::now();
          row.allowed = c.allowed(state[static_cast<size_t>(i)], end);
          auto bb = Clock::now();
          std::copy(src, src + vocab, logits.begin());
          const SampledToken t = sample_token(logits.data(), vocab, row);
          auto cc = Clock::now();
          row.allowed.reset();
          std::copy(src, src + vocab, logits.begin());
          (void)sample_token(logits.data(), vocab, row);
          auto dd = Clock::now();
          step_mask += ms(a, bb);
          step_with += ms(bb, cc);
          step_plain += ms(cc, dd);
          int32_t& s = state[static_cast<size_t>(i)];
          s = t.token == tok.eos_id() ? TokenConstraint::kDead : c.advance(s, t.token);
          if (s < 0) {  // the object is complete: start the next one, as a new request would
            s = c.start();
            ++restarts;
          }
        }
        const double added = step_mask + (step_with - step_plain);
        if (step == 0) {
          first_ms = added;
        } else {
          rest_ms += added;
          mask_ms += step_mask;
          apply_ms += step_with - step_plain;
          plain_ms += step_plain;
        }
      }
      const int n = std::max(1, steps - 1);
      std::printf(
          "batch %3d, %s: compile %.2f ms per request; first step +%.2f ms; then +%.3f ms per step "
          "(mask lookup %.3f, masking in the sampler %.3f; %.1f us per row), unconstrained "
          "sampling "
          "%.3f ms per step; %d objects completed\n",
          b, shared ? "one shared grammar" : "a grammar per request", ms(c0, c1) / b, first_ms,
          rest_ms / n, mask_ms / n, apply_ms / n, 1000 * rest_ms / n / b, plain_ms / n, restarts);
    }
  return 0;
}
