// What the CUDA runner tests share (cuda_runner_test.cpp, cuda_runner_quant_test.cpp,
// cuda_runner_fused_test.cpp): sequences advanced in lockstep through a runner, greedy argmax, CPU
// and CUDA runners with a KV cache of kBlock-token blocks, the fixture models, and the two
// comparisons (a runner against the CPU reference; two runners against each other).
#pragma once

#include <QtTest>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "engine/backend/cpu/cpu_runner_factory.h"
#include "engine/backend/cuda/cuda_runner_factory.h"
#include "engine/model/loaded_model.h"
#include "engine/model/model_loader.h"
#include "engine/runtime/model_runner.h"
#include "test_support.h"

namespace lathe::test {

inline constexpr int32_t kBlock = 16;

// Sequences advanced in lockstep through a runner: one prefill step for all, then decode steps.
struct Batch {
  std::vector<std::vector<TokenId>> tokens;  // per sequence: prompt ++ generated
  std::vector<int32_t> computed;             // tokens already in the KV cache
  std::vector<std::vector<int32_t>> blocks;  // block table per sequence
  int32_t next_block = 0;

  explicit Batch(const std::vector<std::vector<TokenId>>& prompts)
      : tokens(prompts), computed(prompts.size(), 0), blocks(prompts.size()) {}

  // The step that computes every uncomputed token of every sequence and samples each (greedy).
  ModelInput step(int32_t max_blocks) {
    ModelInput in;
    in.query_start.push_back(0);
    in.max_blocks_per_seq = max_blocks;
    for (size_t s = 0; s < tokens.size(); ++s) {
      const int32_t len = static_cast<int32_t>(tokens[s].size());
      while (static_cast<int32_t>(blocks[s].size()) * kBlock < len)
        blocks[s].push_back(next_block++);
      for (int32_t p = computed[s]; p < len; ++p) {
        in.token_ids.push_back(tokens[s][p]);
        in.positions.push_back(p);
        in.slot_mapping.push_back(int64_t{blocks[s][p / kBlock]} * kBlock + p % kBlock);
      }
      in.query_start.push_back(static_cast<int32_t>(in.token_ids.size()));
      in.seq_lens.push_back(len);
      in.max_seq_len = std::max(in.max_seq_len, len);
      in.max_query_len = std::max(in.max_query_len, len - computed[s]);
      std::vector<int32_t> row = blocks[s];
      row.resize(static_cast<size_t>(max_blocks), 0);
      in.block_tables.insert(in.block_tables.end(), row.begin(), row.end());
      in.sample_seqs.push_back(static_cast<int32_t>(s));
      SamplingRow r;
      r.temperature = 0.f;
      in.sampling.push_back(r);
    }
    return in;
  }
  void advance(const std::vector<TokenId>& next) {
    for (size_t s = 0; s < tokens.size(); ++s) {
      computed[s] = static_cast<int32_t>(tokens[s].size());
      tokens[s].push_back(next[s]);
    }
  }
};

inline TokenId argmax(const float* l, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (l[i] > l[best]) best = i;
  return static_cast<TokenId>(best);
}

inline std::vector<float> row_of(const std::vector<float>& all, size_t i, int64_t v) {
  return std::vector<float>(all.begin() + static_cast<std::ptrdiff_t>(i * v),
                            all.begin() + static_cast<std::ptrdiff_t>((i + 1) * v));
}

inline std::unique_ptr<ModelRunner> make_cpu(const LoadedModel& m, int32_t num_blocks) {
  auto r = create_cpu_model_runner(m, CpuRunnerOptions{});
  if (!r.is_ok()) qFatal("%s", r.status().message().c_str());
  if (!r.value()->allocate_kv_cache(num_blocks, kBlock).is_ok()) qFatal("CPU KV cache");
  return std::move(r).value();
}

inline Result<std::unique_ptr<ModelRunner>> make_cuda(const LoadedModel& m, int32_t num_blocks,
                                                      bool eager, int32_t lookahead_max_seqs = 1,
                                                      const CudaSwitches& switches = {},
                                                      int32_t mask_cache_slots = 0) {
  CudaRunnerOptions o;
  o.switches = switches;
  o.mask_cache_slots = mask_cache_slots;
  o.enforce_eager = eager;
  o.lookahead_max_seqs = lookahead_max_seqs;
  o.max_num_seqs = 8;
  o.max_num_batched_tokens = 512;
  o.max_model_len = 512;
  o.gpu_memory_utilization = 0.5;
  LATHE_ASSIGN_OR_RETURN(std::unique_ptr<ModelRunner> r, create_cuda_model_runner(m, o));
  LATHE_RETURN_IF_ERROR(r->allocate_kv_cache(num_blocks, kBlock));
  return r;
}

// The fixture models hold config.json and safetensors only (no tokenizer files).
inline Result<LoadedModel> load_fixture(const std::string& name) {
  LoadOptions lo;
  lo.load_tokenizer = false;
  return load_model(fixture_path("models/" + name), lo);
}

inline std::vector<std::vector<TokenId>> synthetic_prompts(int64_t vocab) {
  std::vector<std::vector<TokenId>> p(3);
  const int lens[3] = {37, 5, 70};
  for (int s = 0; s < 3; ++s)
    for (int i = 0; i < lens[s]; ++i)
      p[s].push_back(static_cast<TokenId>((i * 31 + s * 17 + 3) % vocab));
  return p;
}

// Prefill + `decode_steps` decode steps in lockstep on the CPU and CUDA runners, fed with the CPU's
// greedy tokens; returns the worst relative logit error over the steps.
inline double lockstep_logit_error(const LoadedModel& m, ModelRunner& gpu, int decode_steps,
                                   std::vector<std::vector<TokenId>> prompts = {}) {
  const int64_t v = m.config.vocab_size;
  if (prompts.empty()) prompts = synthetic_prompts(v);
  auto cpu = make_cpu(m, 64);
  Batch b(prompts);
  double worst = 0;
  for (int step = 0; step <= decode_steps; ++step) {
    const ModelInput in = b.step(16);
    auto lc = cpu->compute_logits(in);
    auto lg = gpu.compute_logits(in);
    if (!lc.is_ok() || !lg.is_ok()) {
      qWarning("%s %s", lc.status().message().c_str(), lg.status().message().c_str());
      return INFINITY;
    }
    std::vector<TokenId> next;
    for (size_t s = 0; s < prompts.size(); ++s) {
      const double e = rel_error(row_of(lg.value(), s, v), row_of(lc.value(), s, v));
      worst = std::max(worst, e);
      next.push_back(argmax(lc.value().data() + s * v, v));
    }
    b.advance(next);
  }
  return worst;
}

// Batches of 1 to 4 sequences (graph buckets 1, 2, 4 and 3 padded to 4) in lockstep through two
// runners for `steps` steps (a prefill, then decode steps fed with b's greedy tokens): logits
// within `tol` of each other.
inline void expect_same_logits(const LoadedModel& m, ModelRunner& a, ModelRunner& b, int steps,
                               double tol) {
  const int64_t v = m.config.vocab_size;
  const auto all = synthetic_prompts(v);
  for (size_t batch = 1; batch <= 4; ++batch) {
    std::vector<std::vector<TokenId>> prompts;
    for (size_t i = 0; i < batch; ++i) prompts.push_back(all[i % all.size()]);
    Batch lock(prompts);
    for (int step = 0; step < steps; ++step) {
      const ModelInput in = lock.step(16);
      auto la = a.compute_logits(in);
      auto lb = b.compute_logits(in);
      LATHE_QVERIFY_RESULT(la);
      LATHE_QVERIFY_RESULT(lb);
      LATHE_QVERIFY_REL(la.value(), lb.value(), tol);
      std::vector<TokenId> next;
      for (size_t s = 0; s < prompts.size(); ++s)
        next.push_back(argmax(lb.value().data() + s * v, v));
      lock.advance(next);
    }
  }
}
}  // namespace lathe::test
