// lathe_guided_host_bench: the host's side of a constrained decode step at batch B, as the engine
// core runs it (EngineCore: take the step's tokens, advance each row's grammar state, build the
// next input with each row's mask; engine/runtime/engine_core.h) and, when the CUDA backend is
// built, as the CUDA runner packs it (cuda::pack_step without and with the masks, the way a
// late-bound step does: step_executor.h). The runner is a stand-in that picks each row's token
// pseudo-randomly inside its mask, so the walk visits more grammar states than a model would; its
// own time is left out.
//
//   lathe_guided_host_bench [--model GGUF] [--schema FILE] [--batch 64] [--prompt-len 128]
//                           [--output-len 128] [--iters 4]
//
// Runs the batch unconstrained and then constrained by one shared grammar (as `lathe bench
// latency --guided-json` does: greedy, ignore_eos, the grammar's caches warm after the first
// iteration), and prints per decode step: the engine's host time (step() minus the runner), the
// masks computed (cache misses), and the runner's packing time.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_schema.h"
#include "engine/grammar/grammar_constraint.h"
#include "engine/grammar/json_schema_regex.h"
#include "engine/model/model_loader.h"
#include "engine/runtime/engine_core.h"
#include "engine/runtime/model_runner.h"
#include "engine/runtime/next_decode_input.h"
#include "engine/runtime/token_constraint.h"
#ifdef LATHE_BENCH_WITH_CUDA_PACK
#include "engine/backend/cuda/mask_slot_table.h"
#include "engine/backend/cuda/step_inputs.h"
#endif

using namespace lathe;
using Clock = std::chrono::steady_clock;

namespace {

double us(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

uint64_t mix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  return h ^ (h >> 33);
}

// A model stand-in: each sampled row's token is the first allowed id at or after a pseudo-random
// start (hash of the row's seed, step and last token). Times itself, and (with the CUDA backend)
// packs each decode step as the CUDA runner would.
class PickingRunner final : public ModelRunner {
 public:
  explicit PickingRunner(int64_t vocab) : vocab_(vocab) { info_.device_name = "bench"; }
  const DeviceMemoryInfo& memory_info() const override { return info_; }
  int64_t kv_block_bytes(int32_t) const override { return 4096; }
  Status allocate_kv_cache(int32_t num_blocks, int32_t block_size) override {
    num_blocks_ = num_blocks;
    block_size_ = block_size;
    return Status();
  }
  int64_t vocab_size() const override { return vocab_; }
  Result<std::vector<float>> compute_logits(const ModelInput&) override {
    return unsupported("bench runner");
  }

  Result<ModelOutput> execute(const ModelInput& in) override {
    // Before the forward pass can be launched: (eager) the masks, then the pack the launch reads.
    const auto t0 = Clock::now();
    const bool constrained = has_constrained_rows(in);
    if (eager_) resolve(in);
    pack(in, constrained ? PackMasks::kLater : PackMasks::kNow);
    launch_ = Clock::now();
    // Behind the forward pass: the masks looked up and packed for the sampler.
    if (constrained) {
      resolve(in);
      pack(in, PackMasks::kNow);
    }
    const auto t2 = Clock::now();
    behind_us_ += us(launch_, t2);
    ModelOutput out;
    for (size_t r = 0; r < in.sampling.size(); ++r) {
      const SamplingRow& row = in.sampling[r];
      const int32_t seq = in.sample_seqs[r];
      const TokenId last = in.token_ids[static_cast<size_t>(in.query_start[seq + 1] - 1)];
      const uint64_t h =
          mix(row.seed * 0x9e3779b97f4a7c15ull ^ (row.step << 20) ^ static_cast<uint32_t>(last));
      const TokenMask* mask = constrained ? masks_[r].get() : nullptr;
      SampledToken t;
      t.token = pick(mask, static_cast<TokenId>(h % static_cast<uint64_t>(vocab_)));
      out.tokens.push_back(std::move(t));
    }
    return_ = Clock::now();
    (void)t0;
    return out;
  }

  // The CUDA runner's order (step_executor.h) when eager is false; with eager, every mask is looked
  // up before the launch, as the engine did before it left the lookups to the runner.
  void set_eager(bool eager) { eager_ = eager; }
  Clock::time_point launch_time() const { return launch_; }
  Clock::time_point return_time() const { return return_; }
  double behind_us() const { return behind_us_; }
  int64_t packed_bytes() const { return bytes_; }  // packed for the device, every step

 private:
  enum class PackMasks { kNow, kLater };

  void resolve(const ModelInput& in) {
    masks_.resize(in.sampling.size());
    for (size_t r = 0; r < in.sampling.size(); ++r) masks_[r] = row_mask(in.sampling[r]);
  }

  TokenId pick(const TokenMask* mask, TokenId start) const {
    if (mask == nullptr) return start;
    const TokenMask& m = *mask;
    const int64_t words = std::min<int64_t>(static_cast<int64_t>(m.size()), (vocab_ + 31) / 32);
    for (int64_t k = 0; k <= words; ++k) {
      const int64_t w = (start / 32 + k) % words;
      uint32_t bits = m[static_cast<size_t>(w)];
      if (k == 0) bits &= ~0u << (start & 31);
      if (bits != 0) {
        const int64_t t = w * 32 + __builtin_ctz(bits);
        if (t < vocab_) return static_cast<TokenId>(t);
      }
    }
    return 0;  // nothing allowed: what both samplers return for an all -inf row
  }

  // The CUDA runner's host work for a decode step: pack without the masks (the forward pass is
  // launched from that), then again with them (late-bound sampling rows).
  void pack(const ModelInput& in, PackMasks masks) {
#ifdef LATHE_BENCH_WITH_CUDA_PACK
    if (in.num_tokens() != in.num_seqs()) return;  // prefill: not what this bench measures
    cuda::StepLimits lim;
    lim.max_tokens = 8192;
    lim.max_seqs = 256;
    lim.block_size = block_size_;
    lim.num_blocks = num_blocks_;
    lim.max_pages = int64_t{256} * 1024;
    lim.vocab_size = vocab_;
    const int32_t bucket = in.num_seqs();
    const cuda::MaskPacking m =
        masks == PackMasks::kNow ? cuda::MaskPacking::kNow : cuda::MaskPacking::kLater;
    // The new path names the slots of masks the device cache holds (the CUDA runner's
    // upload_late_sampling); the old one packs every row's words.
    row_slots_.clear();
    if (m == cuda::MaskPacking::kNow && !eager_ && has_constrained_rows(in)) {
      // One table for every run, as the runner keeps its cache across requests.
      static cuda::MaskSlotTable mask_slots_(1024);  // the runner's default at 256 rows
      mask_slots_.begin_step();
      row_slots_.assign(in.sampling.size(), -1);
      for (size_t i = 0; i < in.sampling.size(); ++i) {
        if (!masks_[i]) continue;
        const cuda::MaskSlotTable::Slot slot = mask_slots_.find_or_assign(masks_[i]);
        if (slot.index >= 0 && !slot.fresh) row_slots_[i] = slot.index;
      }
    }
    const int64_t need = cuda::step_bytes(in, lim, bucket, 1, m, row_slots_);
    if (static_cast<int64_t>(host_.size()) < need) host_.resize(static_cast<size_t>(need));
    cuda::PackedStep p;
    const Status s =
        cuda::pack_step(in, lim, bucket, true, host_.data(), static_cast<int64_t>(host_.size()),
                        static_cast<int64_t>(host_.size()), &p, 1, m, row_slots_);
    bytes_ += p.bytes;
    if (!s.is_ok()) std::fprintf(stderr, "pack_step: %s\n", s.message().c_str());
#else
    (void)in;
    (void)masks;
#endif
  }

  int64_t vocab_;
  DeviceMemoryInfo info_;
  int32_t num_blocks_ = 0, block_size_ = 16;
  bool eager_ = false;
  Clock::time_point launch_, return_;
  double behind_us_ = 0;
  std::vector<std::shared_ptr<const TokenMask>> masks_;
  std::vector<uint8_t> host_;
  std::vector<int32_t> row_slots_;
  int64_t bytes_ = 0;
};

struct RunStats {
  // Decode steps: the host's turn between two forward passes (the end of one step's execute() to
  // the next launch), and the host's work behind a launched forward pass (masks looked up and
  // packed).
  double turn_us = 0;
  double turn_median_us = 0;
  double behind_us = 0;
  double masks_computed = 0;  // per step
  double kib_packed = 0;      // per step, both packs (CUDA backend built)
  int32_t steps = 0;
};

RunStats run(const LoadedModel& m, const std::shared_ptr<GrammarConstraint>& grammar, bool eager,
             int batch, int prompt_len, int output_len, int iter) {
  const int64_t vocab = m.config.vocab_size;
  PickingRunner runner(vocab);
  runner.set_eager(eager);
  MetricsRegistry metrics{MetricsOptions{}};
  EngineCoreConfig cfg;
  cfg.limits.max_num_seqs = batch;
  cfg.limits.max_num_batched_tokens = std::max(8192, batch);
  cfg.kv.block_size = 16;
  cfg.kv.num_blocks = batch * ((prompt_len + output_len) / 16 + 2) + 16;
  cfg.tokenizer = m.tokenizer;
  cfg.eos_ids = m.generation.eos_token_ids;
  (void)runner.allocate_kv_cache(cfg.kv.num_blocks, cfg.kv.block_size);
  EngineCore core(cfg, &runner, &metrics);
  std::mt19937_64 rng(1000003ull * static_cast<uint64_t>(iter + 1));
  std::uniform_int_distribution<int64_t> pick(0, vocab - 1);
  for (int i = 0; i < batch; ++i) {
    CoreRequest r;
    r.id = i + 1;
    while (static_cast<int>(r.prompt.size()) < prompt_len) {
      const TokenId t = static_cast<TokenId>(pick(rng));
      if (!m.tokenizer->is_special(t)) r.prompt.push_back(t);
    }
    r.sampling.temperature = 0.f;
    r.sampling.ignore_eos = true;
    r.sampling.max_tokens = output_len;
    r.sampling.constraint = grammar;
    r.seed = static_cast<uint64_t>(i) * 7919 + static_cast<uint64_t>(iter);
    r.arrival = Clock::now();
    core.add_request(std::move(r));
  }
  RunStats s;
  std::vector<double> turns;
  Clock::time_point prev_end{};
  double prev_post = 0;
  int step = 0;
  while (core.has_unfinished()) {
    const double behind_before = runner.behind_us();
    const int64_t bytes_before = runner.packed_bytes();
    const int32_t masks_before = grammar ? grammar->num_masks_computed() : 0;
    const auto t0 = Clock::now();
    core.step();
    const auto t1 = Clock::now();
    if (step++ > 0) {  // after the prefill step
      turns.push_back(prev_post + us(t0, runner.launch_time()));
      s.turn_us += turns.back();
      s.behind_us += runner.behind_us() - behind_before;
      s.kib_packed += static_cast<double>(runner.packed_bytes() - bytes_before) / 1024;
      if (grammar) s.masks_computed += grammar->num_masks_computed() - masks_before;
      ++s.steps;
    }
    prev_post = us(runner.return_time(), t1);
    prev_end = t1;
  }
  (void)prev_end;
  if (s.steps > 0) {
    s.turn_us /= s.steps;
    s.behind_us /= s.steps;
    s.masks_computed /= s.steps;
    s.kib_packed /= s.steps;
    std::sort(turns.begin(), turns.end());
    s.turn_median_us = turns[turns.size() / 2];
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, schema_file;
  int batch = 64, prompt_len = 128, output_len = 128, iters = 4;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--model") {
      model = v;
    } else if (k == "--schema") {
      schema_file = v;
    } else if (k == "--batch") {
      batch = std::atoi(v);
    } else if (k == "--prompt-len") {
      prompt_len = std::atoi(v);
    } else if (k == "--output-len") {
      output_len = std::atoi(v);
    } else if (k == "--iters") {
      iters = std::atoi(v);
    } else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  if (batch < 1 || prompt_len < 1 || output_len < 2 || iters < 1) {
    std::fprintf(stderr, "--batch, --prompt-len, --iters must be >= 1 and --output-len >= 2\n");
    return 2;
  }
  std::string schema = bench::kPersonSchema;
  if (!schema_file.empty()) {
    std::ifstream f(schema_file, std::ios::binary);
    if (!f) {
      std::fprintf(stderr, "cannot open %s\n", schema_file.c_str());
      return 1;
    }
    std::stringstream ss;
    ss << f.rdbuf();
    schema = ss.str();
  }
  Result<std::string> path = resolve_model_path(model);
  if (!path.is_ok()) {
    std::fprintf(stderr, "%s\n", path.status().message().c_str());
    return 1;
  }
  LoadOptions lo;
  Result<LoadedModel> m = load_model(*path, lo);
  if (!m.is_ok() || !m->tokenizer) {
    std::fprintf(stderr, "cannot load the model's tokenizer: %s\n",
                 m.is_ok() ? "none" : m.status().message().c_str());
    return 1;
  }
  const auto parsed = nlohmann::ordered_json::parse(schema, nullptr, false);
  if (parsed.is_discarded()) {
    std::fprintf(stderr, "the schema is not JSON\n");
    return 1;
  }
  Result<std::string> regex = json_schema_to_regex(parsed);
  if (!regex.is_ok()) {
    std::fprintf(stderr, "schema: %s\n", regex.status().message().c_str());
    return 1;
  }
  auto vocabulary = std::make_shared<const TokenVocabulary>(*m->tokenizer);
  // One grammar per variant, each shared by every request and iteration as `lathe bench latency
  // --guided-json` shares one: the first iteration fills its mask cache.
  auto grammar = GrammarConstraint::create(*regex, vocabulary);
  auto grammar_eager = GrammarConstraint::create(*regex, vocabulary);
  if (!grammar.is_ok() || !grammar_eager.is_ok()) {
    std::fprintf(stderr, "grammar: %s\n", grammar.status().message().c_str());
    return 1;
  }
  std::printf("model %s (vocabulary %lld), batch %d, prompt %d, output %d\n", path->c_str(),
              static_cast<long long>(m->config.vocab_size), batch, prompt_len, output_len);
  for (int it = 0; it < iters; ++it) {
    const RunStats plain = run(*m, nullptr, false, batch, prompt_len, output_len, it);
    const RunStats late = run(*m, *grammar, false, batch, prompt_len, output_len, it);
    const RunStats eager = run(*m, *grammar_eager, true, batch, prompt_len, output_len, it);
    std::printf(
        "iteration %d: host turn per decode step (end of a step's execute() to the next launch), "
        "mean (median): unconstrained %.1f (%.1f) us; constrained, masks looked up after the "
        "launch %.1f (%.1f) us, before it %.1f (%.1f) us; behind the forward pass %.1f / %.1f us; "
        "masks computed per "
        "step %.2f / %.2f (%d cached, %d DFA states); packed per step %.1f KiB / %.1f KiB\n",
        it, plain.turn_us, plain.turn_median_us, late.turn_us, late.turn_median_us, eager.turn_us,
        eager.turn_median_us, late.behind_us, eager.behind_us, late.masks_computed,
        eager.masks_computed, (*grammar)->num_cached_masks(), (*grammar)->num_dfa_states(),
        late.kib_packed, eager.kib_packed);
    std::fflush(stdout);
  }
  return 0;
}
