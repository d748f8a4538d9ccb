// lathe_cuda_bench: drives the CUDA model runner directly with ModelInput steps (no engine core),
// so the backend's figures can be taken on their own: batch-1 latency, one long prefill, decode at
// a range of batch sizes, where a decode step's time goes (profile), and an offline throughput run
// with a minimal continuous-batching loop (chunked prefill under the token budget, decodes first,
// KV blocks reserved per request at admission, no preemption). Each figure is printed next to its
// bound:
//   decode: bytes read per step (weights + KV) / measured copy bandwidth
//   prefill and throughput: FLOPs (matmuls + attention) / measured BF16 GEMM rate
//
//   lathe_cuda_bench --model benchmarks/configs/llama-3.1-8b [--copy-gbps G] [--gemm-tflops T]
//       [--latency 512,128] [--prefill 2048] [--decode 1,8,32,64,128,256]
//       [--context 512[,2048,...]] [--profile 1,64] [--throughput 1000,1024,128]
//       [--max-num-seqs 256]
//       [--max-num-batched-tokens 8192] [--max-model-len 4096] [--gpu-memory-utilization 0.9]
//       [--dtype bf16|f16] [--enforce-eager] [--skip LIST]
//       [--quantization fp8|int8|int4|q4_k_m|q4_k|q4_0|q8_0|q5_k_m|q6_k]
// The model is loaded with dummy weights unless --load-format auto is given. GGUF types (dummy
// weights only, engine/model/dummy_gguf.h) keep the projections and the LM head in the blocks a
// file of that type has. With --quantization or a checkpoint's weights the decode bound reads the
// resident weight bytes (all but the 16-bit embedding of an untied model).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "engine/backend/cuda/cuda_model_runner.h"
#include "engine/core/strings.h"
#include "engine/model/loaded_model.h"
#include "engine/model/model_loader.h"

using namespace lathe;
using namespace lathe::cuda;
using Clock = std::chrono::steady_clock;

namespace {

[[noreturn]] void die(const std::string& m) {
  std::fprintf(stderr, "lathe_cuda_bench: %s\n", m.c_str());
  std::exit(1);
}
void check(const Status& s) {
  if (!s.is_ok()) die(s.message());
}
double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

std::vector<int64_t> parse_list(const std::string& s) {
  std::vector<int64_t> v;
  for (const std::string& p : split(s, ',')) {
    if (p.empty()) continue;
    v.push_back(std::atoll(p.c_str()));
  }
  return v;
}

struct Seq {
  std::vector<TokenId> tokens;
  int32_t computed = 0;
  int32_t prompt_len = 0;
  int32_t target = 0;  // total length when done
  std::vector<int32_t> blocks;
};

// Steps of (sequence, tokens to compute) chunks through the runner; blocks from a free list.
class Driver {
 public:
  Driver(CudaModelRunner& r, int32_t num_blocks, int32_t block_size, int64_t vocab)
      : r_(r), block_size_(block_size), vocab_(vocab) {
    for (int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
  }
  int32_t free_blocks() const { return static_cast<int32_t>(free_.size()); }
  int32_t blocks_for(int32_t len) const { return (len + block_size_ - 1) / block_size_; }

  // A new sequence with `prompt_len` random tokens that will grow to `total_len`.
  bool admit(Seq& s, int32_t prompt_len, int32_t total_len, std::mt19937& rng) {
    const int32_t need = blocks_for(total_len);
    if (need > free_blocks()) return false;
    s = Seq();
    s.prompt_len = prompt_len;
    for (int32_t i = 0; i < prompt_len; ++i)
      s.tokens.push_back(static_cast<TokenId>(rng() % vocab_));
    s.target = total_len;
    for (int32_t i = 0; i < need; ++i) {
      s.blocks.push_back(free_.back());
      free_.pop_back();
    }
    return true;
  }
  void release(Seq& s) {
    for (int32_t b : s.blocks) free_.push_back(b);
    s.blocks.clear();
  }

  // Runs one step computing chunks[i].second tokens of chunks[i].first; a sequence whose chunk
  // reaches its last token is sampled and the token appended. Returns the step's wall time (ms).
  // Like the engine, a decode step whose sequences all continue past it says so
  // (ModelInput::next_step_continues: the runner may look ahead).
  double step(const std::vector<std::pair<Seq*, int32_t>>& chunks) {
    ModelInput in;
    in.next_step_continues = true;
    int32_t max_blocks = 1;
    for (const auto& [s, n] : chunks)
      max_blocks = std::max(max_blocks, static_cast<int32_t>(s->blocks.size()));
    in.max_blocks_per_seq = max_blocks;
    in.query_start.push_back(0);
    for (size_t i = 0; i < chunks.size(); ++i) {
      Seq& s = *chunks[i].first;
      const int32_t n = chunks[i].second;
      for (int32_t p = s.computed; p < s.computed + n; ++p) {
        in.token_ids.push_back(s.tokens[static_cast<size_t>(p)]);
        in.positions.push_back(p);
        in.slot_mapping.push_back(int64_t{s.blocks[static_cast<size_t>(p / block_size_)]} *
                                      block_size_ +
                                  p % block_size_);
      }
      in.query_start.push_back(static_cast<int32_t>(in.token_ids.size()));
      in.seq_lens.push_back(s.computed + n);
      in.max_seq_len = std::max(in.max_seq_len, s.computed + n);
      in.max_query_len = std::max(in.max_query_len, n);
      std::vector<int32_t> row = s.blocks;
      row.resize(static_cast<size_t>(max_blocks), 0);
      in.block_tables.insert(in.block_tables.end(), row.begin(), row.end());
      const int32_t len = static_cast<int32_t>(s.tokens.size());
      in.next_step_continues = in.next_step_continues && n == 1 && len + 1 < s.target;
      if (s.computed + n == len) {
        in.sample_seqs.push_back(static_cast<int32_t>(i));
        SamplingRow row_params;
        row_params.temperature = 0.f;
        row_params.step = static_cast<uint64_t>(len - s.prompt_len);
        in.sampling.push_back(row_params);
      }
    }
    const auto t0 = Clock::now();
    auto out = r_.execute(in);
    const double ms = ms_since(t0);
    check(out.status());
    size_t k = 0;
    for (size_t i = 0; i < chunks.size(); ++i) {
      Seq& s = *chunks[i].first;
      s.computed += chunks[i].second;
      if (s.computed == static_cast<int32_t>(s.tokens.size()))
        s.tokens.push_back(out.value().tokens[k++].token);
    }
    return ms;
  }

  // Prefills every sequence (chunked by the token budget).
  void prefill_all(std::vector<Seq>& seqs, int32_t budget) {
    size_t i = 0;
    while (i < seqs.size()) {
      std::vector<std::pair<Seq*, int32_t>> chunks;
      int32_t used = 0;
      while (i < seqs.size() && used < budget) {
        Seq& s = seqs[i];
        const int32_t left = static_cast<int32_t>(s.tokens.size()) - s.computed;
        const int32_t n = std::min(left, budget - used);
        chunks.push_back({&s, n});
        used += n;
        if (n == left)
          ++i;
        else
          break;
      }
      step(chunks);
    }
  }

 private:
  CudaModelRunner& r_;
  int32_t block_size_;
  int64_t vocab_;
  std::vector<int32_t> free_;
};

struct Options {
  std::string model = "benchmarks/configs/llama-3.1-8b";
  bool dummy = true;
  std::string quantization;  // --quantization: fp8|int8|int4, or a GGUF type (dummy_gguf.h)
  CudaRunnerOptions runner;
  double copy_gbps = 0, gemm_tflops = 0;
  std::vector<int64_t> latency = {512, 128};
  int64_t prefill = 2048;
  std::vector<int64_t> decode = {1, 8, 32, 64, 128, 256};
  int64_t context = 512;                  // the profile's, and the first of the decode contexts
  std::vector<int64_t> contexts = {512};  // decode: one table per context
  std::vector<int64_t> profile = {1, 64};
  std::vector<int64_t> throughput = {1000, 1024, 128};
  std::string skip;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  o.runner.max_model_len = 4096;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--model" || a == "-m")
      o.model = next();
    else if (a == "--load-format")
      o.dummy = next() == "dummy";
    else if (a == "--quantization")
      o.quantization = next();
    else if (a == "--copy-gbps")
      o.copy_gbps = std::atof(next().c_str());
    else if (a == "--gemm-tflops")
      o.gemm_tflops = std::atof(next().c_str());
    else if (a == "--latency")
      o.latency = parse_list(next());
    else if (a == "--prefill")
      o.prefill = std::atoll(next().c_str());
    else if (a == "--decode")
      o.decode = parse_list(next());
    else if (a == "--context") {
      o.contexts = parse_list(next());
      if (o.contexts.empty()) die("--context needs at least one length");
      o.context = o.contexts.front();
    } else if (a == "--profile")
      o.profile = parse_list(next());
    else if (a == "--throughput")
      o.throughput = parse_list(next());
    else if (a == "--max-num-seqs")
      o.runner.max_num_seqs = std::atoi(next().c_str());
    else if (a == "--max-num-batched-tokens")
      o.runner.max_num_batched_tokens = std::atoi(next().c_str());
    else if (a == "--max-model-len")
      o.runner.max_model_len = std::atoi(next().c_str());
    else if (a == "--gpu-memory-utilization")
      o.runner.gpu_memory_utilization = std::atof(next().c_str());
    else if (a == "--dtype")
      o.runner.dtype = next() == "f16" ? DType::kF16 : DType::kBF16;
    else if (a == "--enforce-eager")
      o.runner.enforce_eager = true;
    else if (a == "--skip")
      o.skip = next();
    else if (a == "--help" || a == "-h") {
      std::printf("see the comment at the top of engine/backend/cuda/tools/cuda_bench.cpp\n");
      return 0;
    } else {
      die("unknown option " + a);
    }
  }
  auto skipped = [&](const char* what) { return o.skip.find(what) != std::string::npos; };

  LoadOptions lo;
  lo.load_format = o.dummy ? LoadFormat::kDummy : LoadFormat::kAuto;
  lo.load_tokenizer = false;
  if (!o.quantization.empty())
    check(parse_quantization_option(o.quantization, o.dummy, &lo.quantization, &lo.dummy_gguf));
  auto model = load_model(o.model, lo);
  check(model.status());
  const ModelConfig& c = model.value().config;
  // The A/B switches of the GPU run scripts (LATHE_CUDA_*), as the command line reads them.
  std::vector<std::string> warnings;
  o.runner.switches = cuda_switches_from_environment(&warnings);
  for (const std::string& w : warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  const auto t_load = Clock::now();
  auto created = CudaModelRunner::create(model.value(), o.runner);
  check(created.status());
  CudaModelRunner& r = *created.value();
  const DeviceMemoryInfo& mem = r.memory_info();
  const int32_t bs = 16;
  const int32_t num_blocks = static_cast<int32_t>(mem.kv_budget_bytes / r.kv_block_bytes(bs));
  check(r.allocate_kv_cache(num_blocks, bs));
  std::printf("model: %s (%s, %s parameters), %s\n", o.model.c_str(), c.name.c_str(),
              format_count(static_cast<double>(c.num_parameters())).c_str(),
              o.dummy ? "dummy weights" : "weights");
  std::printf("runner: %s\n", r.plan_summary().c_str());
  std::printf("KV cache: %d blocks x %d tokens; ready in %.1f s\n", num_blocks, bs,
              ms_since(t_load) / 1e3);
  for (const LinearTiming& t : r.linear_timings())
    if (t.m == 1 || t.m == 8)
      std::printf("linear %-14s M=%lld: gemv %.1f us, cuBLASLt %.1f us -> %s\n", t.name.c_str(),
                  static_cast<long long>(t.m), t.gemv_us, t.cublas_us,
                  t.use_gemv ? "gemv" : "cuBLASLt");
  std::string fused_summary;
  for (const FusedDecodeChoice& f : r.fused_decode_choices()) {
    std::printf(
        "fused decode M=%lld: %.1f us/layer fused (blocks/SM qkv %d o %d gate_up %d down %d "
        "lm_head %d; RoPE/KV in the QKV epilogue %.1f us vs QKV + rope kernel %.1f us: %s; "
        "LM head with the final norm %.1f us vs norm + LM head %.1f us: %s) vs %.1f us/layer "
        "unfused -> %s%s%s\n",
        static_cast<long long>(f.m), f.fused_us, f.blocks_per_sm[0], f.blocks_per_sm[1],
        f.blocks_per_sm[2], f.blocks_per_sm[3], f.blocks_per_sm[4], f.rope_fused_us,
        f.rope_unfused_us, f.rope ? "fused" : "separate", f.lm_fused_us, f.lm_unfused_us,
        f.lm_head ? "fused" : "separate", f.unfused_us,
        f.use ? ("fused " + f.parts.name()).c_str() : "unfused", f.note.empty() ? "" : ": ",
        f.note.c_str());
    fused_summary +=
        strformat(" M%lld %.1f/%.1f", static_cast<long long>(f.m), f.fused_us, f.unfused_us);
    if (f.step_unfused_us > 0)
      fused_summary +=
          strformat(" step %.0f/%.0f", f.use ? f.step_us : f.step_unfused_us, f.step_unfused_us);
    fused_summary += ' ';
    fused_summary += f.use ? f.parts.name() + '*' : std::string("unfused");
  }

  // Bytes and FLOPs of the model, for the bounds.
  const int64_t h = c.hidden_size, ffn = c.intermediate_size, v = c.vocab_size;
  const int64_t matrix_params =
      c.num_layers * (h * (c.q_size() + 2 * c.kv_size()) + c.q_size() * h + 3 * h * ffn);
  // Weights read per step: all resident weights but the embedding (one row per token), as stored
  // (quantized projections at their format's bytes, scales and zero points included).
  const double embedding_bytes = c.tie_word_embeddings ? 0.0 : 2.0 * static_cast<double>(v * h);
  // 16-bit dummy weights: the matrices' bytes; otherwise (a quantized dummy, or a checkpoint whose
  // formats may be quantized, e.g. a GGUF file) the resident bytes.
  const bool resident_bound = !o.quantization.empty() || !o.dummy;
  const double weight_bytes_per_step = resident_bound
                                           ? static_cast<double>(mem.weight_bytes) - embedding_bytes
                                           : 2.0 * static_cast<double>(matrix_params + v * h);
  const double kv_per_token = static_cast<double>(c.kv_bytes_per_token(2));
  std::printf("weights: %.3f GB resident (%s), %.3f GB read per decode step\n",
              static_cast<double>(mem.weight_bytes) / 1e9,
              o.quantization.empty()
                  ? "as stored"
                  : (std::string("projections --quantization ") + o.quantization).c_str(),
              weight_bytes_per_step / 1e9);
  auto decode_bound_tps = [&](int64_t batch, double avg_ctx) {
    const double bytes = weight_bytes_per_step + batch * avg_ctx * kv_per_token;
    return o.copy_gbps > 0 ? batch / (bytes / (o.copy_gbps * 1e9)) : 0.0;
  };
  std::mt19937 rng(1234);
  Driver drv(r, num_blocks, bs, v);
  std::vector<std::string> summary;

  // 1. Batch-1 latency: prefill `in` tokens, then out - 1 decode steps.
  if (!skipped("latency") && o.latency.size() == 2) {
    const int32_t in = static_cast<int32_t>(o.latency[0]), out = static_cast<int32_t>(o.latency[1]);
    std::vector<double> ttft, tpot, total;
    for (int rep = 0; rep < 4; ++rep) {
      std::vector<Seq> seqs(1);
      if (!drv.admit(seqs[0], in, in + out, rng)) die("KV cache too small for the latency run");
      const auto t0 = Clock::now();
      const double first = drv.step({{&seqs[0], in}});
      const auto t1 = Clock::now();
      for (int32_t k = 1; k < out; ++k) drv.step({{&seqs[0], 1}});
      const double decode_ms = ms_since(t1);
      if (rep > 0) {  // the first run warms up
        ttft.push_back(first);
        tpot.push_back(decode_ms / (out - 1));
        total.push_back(ms_since(t0));
      }
      drv.release(seqs[0]);
    }
    const double tp = std::accumulate(tpot.begin(), tpot.end(), 0.0) / tpot.size();
    const double tt = std::accumulate(ttft.begin(), ttft.end(), 0.0) / ttft.size();
    const double tot = std::accumulate(total.begin(), total.end(), 0.0) / total.size();
    const double bound = decode_bound_tps(1, in + out / 2.0);
    std::printf(
        "\n[latency] batch 1, input %d, output %d: TTFT %.2f ms, TPOT %.3f ms (%.1f tok/s), "
        "request %.1f ms\n",
        in, out, tt, tp, 1e3 / tp, tot);
    const auto& st = r.last_step_times();
    std::printf(
        "[latency] last decode step host time: prepare %.1f us, launch %.1f us, wait %.1f us, "
        "finish %.1f us (graph %d); lookahead hits %lld, misses %lld\n",
        st.prepare_us, st.launch_us, st.wait_us, st.finish_us, st.graph ? st.bucket : 0,
        static_cast<long long>(r.lookahead_hits()), static_cast<long long>(r.lookahead_misses()));
    if (bound > 0)
      std::printf(
          "[latency] roofline %.1f tok/s (%.2f GB/token at %.0f GB/s): %.1f%% of roofline\n", bound,
          (weight_bytes_per_step + (in + out / 2.0) * kv_per_token) / 1e9, o.copy_gbps,
          100.0 * (1e3 / tp) / bound);
    summary.push_back(strformat(
        "batch-1 decode (in %d, out %d)   %8.1f tok/s  TPOT %.3f ms  TTFT %.1f ms  %s", in, out,
        1e3 / tp, tp, tt,
        bound > 0 ? strformat("= %.1f%% of roofline %.0f tok/s", 100.0 * (1e3 / tp) / bound, bound)
                        .c_str()
                  : ""));
  }

  // 2. One prefill of `prefill` tokens.
  if (!skipped("prefill") && o.prefill > 0 && o.prefill <= o.runner.max_num_batched_tokens) {
    const int32_t n = static_cast<int32_t>(o.prefill);
    std::vector<double> t;
    for (int rep = 0; rep < 6; ++rep) {
      Seq s;
      if (!drv.admit(s, n, n + 1, rng)) die("KV cache too small for the prefill run");
      const double ms = drv.step({{&s, n}});
      if (rep > 0) t.push_back(ms);
      drv.release(s);
    }
    std::sort(t.begin(), t.end());
    const double ms = t[t.size() / 2];
    const double flops =
        2.0 * static_cast<double>(matrix_params) * n + 2.0 * v * h +
        4.0 * c.num_layers * c.num_heads * c.head_dim * (static_cast<double>(n) * (n + 1) / 2.0);
    const double tf = flops / (ms * 1e-3) / 1e12;
    std::printf(
        "\n[prefill] %d tokens: %.2f ms (median of 5), %.0f tokens/s, %.1f TFLOP/s (%.2f TFLOP "
        "incl. attention)\n",
        n, ms, n / (ms * 1e-3), tf, flops / 1e12);
    if (o.gemm_tflops > 0)
      std::printf("[prefill] %.1f%% of the measured BF16 GEMM peak %.0f TFLOP/s\n",
                  100 * tf / o.gemm_tflops, o.gemm_tflops);
    summary.push_back(strformat(
        "prefill %d tokens               %8.2f ms    %.0f tok/s  %.0f TFLOP/s  %s", n, ms,
        n / (ms * 1e-3), tf,
        o.gemm_tflops > 0 ? strformat("= %.1f%% of GEMM peak", 100 * tf / o.gemm_tflops).c_str()
                          : ""));
  }

  // 3. Decode at batch sizes: prefill B sequences of `context` tokens, then timed decode steps.
  double step_ms_b64 = 0, cpu_us_b64 = 0;
  for (int64_t context : o.contexts) {
    if (skipped("decode")) break;
    std::printf("\n[decode] context %lld tokens, 8 warm-up + 32 timed steps per batch size\n",
                static_cast<long long>(context));
    std::printf("[decode] %5s %10s %10s %12s %12s %10s %8s\n", "batch", "step_ms", "tok/s",
                "host_us", "host_%", "bound_tok/s", "%bound");
    std::string curve;
    for (int64_t b : o.decode) {
      if (b > o.runner.max_num_seqs) continue;
      std::vector<Seq> seqs(static_cast<size_t>(b));
      bool ok = true;
      for (Seq& s : seqs)
        ok = ok &&
             drv.admit(s, static_cast<int32_t>(context), static_cast<int32_t>(context) + 48, rng);
      if (!ok) {
        std::printf("[decode] %5lld: KV cache too small, skipped\n", static_cast<long long>(b));
        for (Seq& s : seqs) drv.release(s);
        continue;
      }
      drv.prefill_all(seqs, o.runner.max_num_batched_tokens);
      std::vector<std::pair<Seq*, int32_t>> chunks;
      for (Seq& s : seqs) chunks.push_back({&s, 1});
      for (int k = 0; k < 8; ++k) drv.step(chunks);
      double host = 0;
      const auto t0 = Clock::now();
      for (int k = 0; k < 32; ++k) {
        drv.step(chunks);
        const auto& st = r.last_step_times();
        host += st.prepare_us + st.launch_us + st.finish_us;
      }
      const double step = ms_since(t0) / 32;
      host /= 32;
      const double tps = b / (step * 1e-3);
      const double bound = decode_bound_tps(b, context + 24);
      std::printf("[decode] %5lld %10.3f %10.0f %12.1f %11.1f%% %10.0f %7.1f%%\n",
                  static_cast<long long>(b), step, tps, host, 100 * host / (step * 1e3), bound,
                  bound > 0 ? 100 * tps / bound : 0.0);
      curve += strformat(" B%lld=%.0f", static_cast<long long>(b), tps);
      if (b == 64 && context == o.context) step_ms_b64 = step, cpu_us_b64 = host;
      for (Seq& s : seqs) drv.release(s);
    }
    summary.push_back("decode tok/s (context " + std::to_string(context) + "):" + curve);
    if (step_ms_b64 > 0 && context == o.context)
      summary.push_back(strformat(
          "CPU overhead per step at batch 64: %.1f us of %.3f ms = %.2f%% (target < 10%%)",
          cpu_us_b64, step_ms_b64, 100 * cpu_us_b64 / (step_ms_b64 * 1e3)));
  }

  // 4. Where a decode step's time goes: GPU time per phase (event records inside the CUDA graph).
  if (!skipped("profile")) {
    for (int64_t b : o.profile) {
      if (b > o.runner.max_num_seqs) continue;
      std::vector<Seq> seqs(static_cast<size_t>(b));
      for (Seq& s : seqs)
        drv.admit(s, static_cast<int32_t>(o.context), static_cast<int32_t>(o.context) + 40, rng);
      drv.prefill_all(seqs, o.runner.max_num_batched_tokens);
      std::vector<std::pair<Seq*, int32_t>> chunks;
      for (Seq& s : seqs) chunks.push_back({&s, 1});
      for (int k = 0; k < 4; ++k) drv.step(chunks);
      double wall = 0, prep = 0, launch = 0, finish = 0;
      for (int k = 0; k < 16; ++k) {
        wall += drv.step(chunks);
        const auto& st = r.last_step_times();
        prep += st.prepare_us, launch += st.launch_us, finish += st.finish_us;
      }
      wall /= 16, prep /= 16, launch /= 16, finish /= 16;
      r.set_profiling(true);
      r.reset_profile();
      drv.step(chunks);  // captures the profiled graph
      r.reset_profile();
      for (int k = 0; k < 16; ++k) drv.step(chunks);
      r.set_profiling(false);
      const auto& ph = r.phase_ms();
      const double n = std::max(1, r.profiled_steps());
      auto get = [&](Phase p) { return ph[static_cast<size_t>(p)] / n; };
      const double gemm = get(Phase::kQkvGemm) + get(Phase::kOGemm) + get(Phase::kGateUpGemm) +
                          get(Phase::kDownGemm) + get(Phase::kLmHead);
      const double attn = get(Phase::kAttention);
      const double other = get(Phase::kEmbedding) + get(Phase::kNorm) + get(Phase::kRopeKv) +
                           get(Phase::kSwiglu) + get(Phase::kSampler);
      const double gpu = gemm + attn + other;
      const double cpu = (prep + finish) / 1e3;
      const double gaps = std::max(0.0, wall - gpu - cpu);
      std::printf("\n[profile] batch %lld, context %lld: step %.3f ms (wall, graph replay)\n",
                  static_cast<long long>(b), static_cast<long long>(o.context), wall);
      for (int p = 0; p < static_cast<int>(Phase::kCount); ++p)
        std::printf("[profile]   %-14s %8.3f ms %5.1f%%\n", phase_name(static_cast<Phase>(p)),
                    get(static_cast<Phase>(p)), 100 * get(static_cast<Phase>(p)) / wall);
      std::printf(
          "[profile]   host: prepare %.1f us, launch %.1f us (overlaps the GPU), finish %.1f us\n",
          prep, launch, finish);
      summary.push_back(strformat(
          "profile B=%-4lld step %.3f ms: GEMM %.3f (%.0f%%), attention %.3f (%.0f%%), other "
          "kernels "
          "%.3f (%.0f%%), CPU %.3f (%.0f%%), gaps %.3f (%.0f%%)",
          static_cast<long long>(b), wall, gemm, 100 * gemm / wall, attn, 100 * attn / wall, other,
          100 * other / wall, cpu, 100 * cpu / wall, gaps, 100 * gaps / wall));
      for (Seq& s : seqs) drv.release(s);
    }
  }

  // 5. Offline throughput: N requests of I input and O output tokens.
  if (!skipped("throughput") && o.throughput.size() == 3) {
    const int64_t nreq = o.throughput[0];
    const int32_t in = static_cast<int32_t>(o.throughput[1]),
                  out = static_cast<int32_t>(o.throughput[2]);
    const int32_t budget = o.runner.max_num_batched_tokens, max_seqs = o.runner.max_num_seqs;
    std::vector<Seq> seqs(static_cast<size_t>(nreq));
    std::vector<size_t> running;
    size_t next = 0, done = 0;
    int64_t steps = 0;
    const auto t0 = Clock::now();
    while (done < seqs.size()) {
      while (next < seqs.size() && static_cast<int32_t>(running.size()) < max_seqs &&
             drv.admit(seqs[next], in, in + out, rng))
        running.push_back(next++);
      std::vector<std::pair<Seq*, int32_t>> chunks;
      int32_t used = 0;
      for (size_t i : running) {  // decodes first
        Seq& s = seqs[i];
        if (s.computed == static_cast<int32_t>(s.tokens.size()) - 1 && s.computed >= in) {
          chunks.push_back({&s, 1});
          ++used;
        }
      }
      for (size_t i : running) {  // then prefill chunks
        Seq& s = seqs[i];
        if (s.computed >= in || used >= budget) continue;
        const int32_t n = std::min(in - s.computed, budget - used);
        chunks.push_back({&s, n});
        used += n;
      }
      if (chunks.empty()) die("throughput: no work and requests left (KV cache too small?)");
      // The runner wants sequences in any order, but each at most once: chunks are distinct.
      drv.step(chunks);
      ++steps;
      for (size_t k = 0; k < running.size();) {
        Seq& s = seqs[running[k]];
        if (static_cast<int32_t>(s.tokens.size()) >= s.target) {
          drv.release(s);
          running[k] = running.back();
          running.pop_back();
          ++done;
        } else {
          ++k;
        }
      }
    }
    const double sec = ms_since(t0) / 1e3;
    const double total_tokens = static_cast<double>(nreq) * (in + out);
    const double ceiling_s =
        o.gemm_tflops > 0 ? total_tokens * 2.0 * c.num_parameters() / (o.gemm_tflops * 1e12) : 0;
    std::printf(
        "\n[throughput] %lld requests, input %d, output %d: %.1f s, %lld steps, %.2f req/s, %.0f "
        "output tok/s, %.0f total tok/s\n",
        static_cast<long long>(nreq), in, out, sec, static_cast<long long>(steps), nreq / sec,
        nreq * out / sec, total_tokens / sec);
    if (ceiling_s > 0)
      std::printf(
          "[throughput] compute ceiling %.1f s (tokens x 2 x params / GEMM peak): %.1f%% of it\n",
          ceiling_s, 100 * ceiling_s / sec);
    summary.push_back(strformat(
        "throughput %lld x (%d in, %d out)  %8.0f output tok/s  %.0f total tok/s  %.2f req/s  %s",
        static_cast<long long>(nreq), in, out, nreq * out / sec, total_tokens / sec, nreq / sec,
        ceiling_s > 0 ? strformat("= %.1f%% of compute ceiling", 100 * ceiling_s / sec).c_str()
                      : ""));
  }

  std::printf("\n==== lathe_cuda_bench summary: %s, %s ====\n", r.memory_info().device_name.c_str(),
              std::string(dtype_name(o.runner.dtype)).c_str());
  std::printf(
      "paths: decode attention %s; fused decode per M: kernels alone us/layer fused/unfused, whole "
      "step us chosen/unfused, parts used (*):%s\n",
      r.uses_decode_attention() ? "tensor-core GQA" : "split-KV",
      fused_summary.empty() ? " off" : fused_summary.c_str());
  if (o.copy_gbps > 0 || o.gemm_tflops > 0)
    std::printf(
        "bounds (measured in this run): copy %.0f GB/s (read+write), BF16 GEMM %.0f TFLOP/s\n",
        o.copy_gbps, o.gemm_tflops);
  for (const std::string& s : summary) std::printf("%s\n", s.c_str());
  return 0;
}
