// lathe_cpu_bench: prefill and decode speed of the CPU runner on a model (default: the default
// model), driven through ModelInput like the engine does, next to the memory-bandwidth bound.
// Not a test: timings depend on the machine. Usage:
//   lathe_cpu_bench [--model PATH] [--threads N] [--prompt-len N] [--decode-steps N] [--batches
//   1,4,16]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "engine/backend/cpu/cpu_model_runner.h"
#include "engine/backend/cpu/cpu_runner_factory.h"
#include "engine/core/thread_pool.h"
#include "engine/model/model_loader.h"

using namespace lathe;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int32_t kBlockSize = 16;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// CPU time of the whole process (all threads), for measurements on a busy machine.
double process_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

std::vector<int> parse_list(const std::string& list) {
  std::vector<int> out;
  for (size_t p = 0; p < list.size();) {
    out.push_back(std::atoi(list.c_str() + p));
    p = list.find(',', p);
    if (p == std::string::npos) break;
    ++p;
  }
  return out;
}

struct Batch {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<int32_t> computed;
  int32_t max_blocks = 0;
};

// All sequences compute their uncomputed tokens (prefill) or their one new token (decode).
ModelInput make_step(const Batch& b) {
  ModelInput in;
  in.query_start.push_back(0);
  in.max_blocks_per_seq = b.max_blocks;
  for (size_t s = 0; s < b.tokens.size(); ++s) {
    const int32_t len = static_cast<int32_t>(b.tokens[s].size());
    const int32_t base = static_cast<int32_t>(s) * b.max_blocks;
    for (int32_t p = b.computed[s]; p < len; ++p) {
      in.token_ids.push_back(b.tokens[s][p]);
      in.positions.push_back(p);
      in.slot_mapping.push_back(int64_t{base + p / kBlockSize} * kBlockSize + p % kBlockSize);
    }
    in.max_query_len = std::max(in.max_query_len, len - b.computed[s]);
    in.query_start.push_back(static_cast<int32_t>(in.token_ids.size()));
    in.seq_lens.push_back(len);
    in.max_seq_len = std::max(in.max_seq_len, len);
    for (int32_t i = 0; i < b.max_blocks; ++i) in.block_tables.push_back(base + i);
    in.sample_seqs.push_back(static_cast<int32_t>(s));
    SamplingRow row;
    row.temperature = 0.f;
    in.sampling.push_back(row);
  }
  return in;
}

// Reads `bytes` with `threads` threads, returns GB/s (best of 5): the bandwidth a decode step can
// use.
double read_bandwidth(int threads, size_t bytes) {
  std::vector<float> buf(bytes / sizeof(float), 1.0f);
  ThreadPool pool(threads);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    std::vector<double> sums(static_cast<size_t>(threads) * 8, 0.0);
    const auto t0 = Clock::now();
    const int64_t n = static_cast<int64_t>(buf.size());
    pool.parallel_for(threads, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const int64_t lo = n * t / threads, hi = n * (t + 1) / threads;
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int64_t i = lo; i + 8 <= hi; i += 8)
          for (int j = 0; j < 8; ++j) acc[j] += buf[i + j];
        for (int j = 0; j < 8; ++j) sums[t * 8 + j] = acc[j];
      }
    });
    const double s = seconds_since(t0);
    volatile double sink = sums[0];
    (void)sink;
    best = std::max(best, static_cast<double>(bytes) / s / 1e9);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_path;
  int threads = 0, prompt_len = 128, decode_steps = 32;
  std::vector<int> batches = {1, 4, 16, 32};
  std::vector<int> prefills = {128, 512};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--model")
      model_path = next();
    else if (a == "--threads")
      threads = std::atoi(next());
    else if (a == "--prompt-len")
      prompt_len = std::atoi(next());
    else if (a == "--decode-steps")
      decode_steps = std::atoi(next());
    else if (a == "--batches")
      batches = parse_list(next());
    else if (a == "--prefill")
      prefills = parse_list(next());
    else {
      std::fprintf(stderr,
                   "usage: %s [--model PATH] [--threads N] [--prompt-len N] [--decode-steps N] "
                   "[--batches 1,4,16]\n"
                   "          [--prefill 128,512]\n",
                   argv[0]);
      return 2;
    }
  }
  Result<std::string> path = resolve_model_path(model_path);
  if (!path.is_ok()) {
    std::fprintf(stderr, "%s\n", path.status().message().c_str());
    return 1;
  }
  LoadOptions lo;
  lo.load_tokenizer = false;
  Result<LoadedModel> model = load_model(*path, lo);
  if (!model.is_ok()) {
    std::fprintf(stderr, "%s\n", model.status().message().c_str());
    return 1;
  }
  CpuRunnerOptions ro;
  ro.num_threads = threads;
  Result<std::unique_ptr<CpuModelRunner>> runner = CpuModelRunner::create(*model, ro);
  if (!runner.is_ok()) {
    std::fprintf(stderr, "%s\n", runner.status().message().c_str());
    return 1;
  }
  CpuModelRunner& r = **runner;
  const ModelConfig& c = model->config;
  const int max_batch = *std::max_element(batches.begin(), batches.end());
  const int32_t max_blocks = (prompt_len + decode_steps + kBlockSize) / kBlockSize + 1;
  const int max_prefill =
      prefills.empty() ? 0 : *std::max_element(prefills.begin(), prefills.end());
  const int32_t num_blocks =
      std::max(max_batch * max_blocks, (max_prefill + kBlockSize - 1) / kBlockSize);
  if (!r.allocate_kv_cache(num_blocks, kBlockSize).is_ok()) return 1;
  std::printf("model %s, %s\n", path->c_str(), r.memory_info().device_name.c_str());

  // Bytes a batch-1 decode step reads: every layer matrix once, the output matrix once (embedding
  // rows are negligible), plus K and V of the context.
  const int64_t output_bytes = model->weights.find("output")
                                   ? model->weights.find("output")->nbytes()
                                   : model->weights.find("token_embd")->nbytes();
  int64_t layer_bytes = 0;
  for (const auto& [name, view] : model->weights.tensors())
    if (name.rfind("blk.", 0) == 0) layer_bytes += view.nbytes();
  const double bw = read_bandwidth(r.num_threads(), size_t{512} << 20);
  std::printf("read bandwidth (%d threads, 512 MiB buffer): %.1f GB/s\n", r.num_threads(), bw);

  auto tokens_for = [&](int s, int n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i)
      t[i] = static_cast<int32_t>((i * 7919 + s * 104729 + 11) % c.vocab_size);
    return t;
  };

  // Prefill: one sequence of `len` tokens in one step (best of 3).
  for (int len : prefills) {
    double best = 1e30, best_cpu = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      Batch b;
      b.tokens = {tokens_for(0, len)};
      b.computed = {0};
      b.max_blocks = (len + kBlockSize - 1) / kBlockSize;
      const ModelInput in = make_step(b);
      const auto t0 = Clock::now();
      const double c0 = process_cpu_seconds();
      if (!r.execute(in).is_ok()) return 1;
      best = std::min(best, seconds_since(t0));
      best_cpu = std::min(best_cpu, process_cpu_seconds() - c0);
    }
    std::printf("prefill %4d tokens: %7.1f ms (cpu %7.1f ms)  %7.1f tokens/s\n", len, best * 1e3,
                best_cpu * 1e3, len / best);
  }

  for (int batch : batches) {
    Batch b;
    for (int s = 0; s < batch; ++s) {
      b.tokens.push_back(tokens_for(s, prompt_len));
      b.computed.push_back(0);
    }
    b.max_blocks = max_blocks;
    for (int s = 0; s < batch; ++s) {  // prefill each sequence (not timed)
      Batch one;
      one.tokens = {b.tokens[s]};
      one.computed = {0};
      one.max_blocks = max_blocks;
      ModelInput in = make_step(one);
      for (int32_t& blk : in.block_tables) blk += s * max_blocks;
      for (int64_t& slot : in.slot_mapping) slot += int64_t{s} * max_blocks * kBlockSize;
      Result<ModelOutput> o = r.execute(in);
      if (!o.is_ok()) return 1;
      b.tokens[s].push_back(o->tokens[0].token);
      b.computed[s] = prompt_len;
    }
    std::vector<double> step_s, cpu_s;
    for (int step = 0; step < decode_steps; ++step) {
      const ModelInput in = make_step(b);
      const auto t0 = Clock::now();
      const double c0 = process_cpu_seconds();
      Result<ModelOutput> o = r.execute(in);
      step_s.push_back(seconds_since(t0));
      cpu_s.push_back(process_cpu_seconds() - c0);
      if (!o.is_ok()) {
        std::fprintf(stderr, "%s\n", o.status().message().c_str());
        return 1;
      }
      for (int s = 0; s < batch; ++s) {
        b.computed[s] = static_cast<int32_t>(b.tokens[s].size());
        b.tokens[s].push_back(o->tokens[s].token);
      }
    }
    std::sort(step_s.begin(), step_s.end());
    std::sort(cpu_s.begin(), cpu_s.end());
    const double median = step_s[step_s.size() / 2];
    const double kv_bytes =
        double(c.kv_bytes_per_token(4)) * (prompt_len + decode_steps / 2) * batch;
    const double bytes = double(layer_bytes + output_bytes) + kv_bytes;
    std::printf(
        "decode batch %3d: step %6.2f ms (median of %d; cpu %6.2f ms)  %7.1f tokens/s  reads %.1f "
        "MB/step "
        "= %.1f GB/s (bound at %.1f GB/s: %.1f steps/s)\n",
        batch, median * 1e3, decode_steps, cpu_s[cpu_s.size() / 2] * 1e3, batch / median,
        bytes / 1e6, bytes / median / 1e9, bw, bw * 1e9 / bytes);
  }
  return 0;
}
