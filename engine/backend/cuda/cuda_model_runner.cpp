#include "engine/backend/cuda/cuda_model_runner.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "engine/backend/cuda/add_rms_norm.h"
#include "engine/backend/cuda/decode_attention.h"
#include "engine/backend/cuda/embedding.h"
#include "engine/backend/cuda/paged_attention.h"
#include "engine/backend/cuda/process_logits.h"
#include "engine/backend/cuda/qkv_rope_kv.h"
#include "engine/backend/cuda/sample_tokens.h"
#include "engine/backend/cuda/swiglu.h"
#include "engine/core/log.h"
#include "engine/core/strings.h"
#include "engine/model/loaded_model.h"

namespace lathe::cuda {
namespace {

using Clock = std::chrono::steady_clock;
double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

// Device memory kept free for CUDA graph instantiation and driver bookkeeping after the KV cache.
constexpr int64_t kGraphReserveBytes = int64_t{256} << 20;
// Host staging for the variable part of a step (page lists, banned ids, penalty histories); grows.
constexpr int64_t kInitialTailBytes = int64_t{1} << 20;
// Banned ids per sampled row the device buffer reserves room for (EOS and stop ids).
constexpr int64_t kBannedPerRow = 256;
// At most this much device memory for banned ids and penalty histories of one step (64M tokens).
constexpr int64_t kMaxTailBytes = int64_t{256} << 20;

}  // namespace

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::kEmbedding:
      return "embedding";
    case Phase::kNorm:
      return "rmsnorm";
    case Phase::kQkvGemm:
      return "qkv_proj";
    case Phase::kRopeKv:
      return "rope_kv_write";
    case Phase::kAttention:
      return "attention";
    case Phase::kOGemm:
      return "o_proj";
    case Phase::kGateUpGemm:
      return "gate_up_proj";
    case Phase::kSwiglu:
      return "swiglu";
    case Phase::kDownGemm:
      return "down_proj";
    case Phase::kLmHead:
      return "lm_head";
    case Phase::kSampler:
      return "sampler";
    case Phase::kCount:
      break;
  }
  return "?";
}

Result<std::unique_ptr<CudaModelRunner>> CudaModelRunner::create(const LoadedModel& model,
                                                                 const CudaRunnerOptions& options) {
  std::unique_ptr<CudaModelRunner> r(new CudaModelRunner());
  LATHE_RETURN_IF_ERROR(r->init(model, options));
  return r;
}

CudaModelRunner::~CudaModelRunner() {
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  for (auto& [b, g] : graphs_) cudaGraphExecDestroy(g);
  for (auto& [b, g] : profile_graphs_) cudaGraphExecDestroy(g);
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

int64_t CudaModelRunner::kv_block_bytes(int32_t block_size) const {
  return config_.kv_bytes_per_token(2) * block_size;
}

Status CudaModelRunner::init(const LoadedModel& model, const CudaRunnerOptions& o) {
  LATHE_RETURN_IF_ERROR(model.config.validate());
  if (!is_act_dtype(o.dtype))
    return invalid_argument("the CUDA backend computes in bf16 or f16, not " +
                            std::string(dtype_name(o.dtype)));
  if (!(o.gpu_memory_utilization > 0.0 && o.gpu_memory_utilization <= 1.0))
    return invalid_argument(
        strformat("--gpu-memory-utilization must be in (0, 1], got %g", o.gpu_memory_utilization));
  if (o.max_num_seqs < 0 || o.max_num_batched_tokens < 0 || o.block_size < 0 || o.max_model_len < 0)
    return invalid_argument(
        "max-num-seqs, max-num-batched-tokens, max-model-len and block size must not be negative");
  std::string why;
  if (!cuda_device_available(&why)) return unsupported("no usable CUDA device: " + why);
  int count = 0;
  LATHE_CUDA_TRY(cudaGetDeviceCount(&count));
  if (o.device < 0 || o.device >= count)
    return invalid_argument(
        strformat("CUDA device %d does not exist (%d devices)", o.device, count));
  LATHE_CUDA_TRY(cudaSetDevice(o.device));
  LATHE_ASSIGN_OR_RETURN(props_, device_props(o.device));
  if (props_.major < 8)
    return unsupported(
        strformat("%s has compute capability %d.%d; the CUDA backend needs 8.0 (Ampere) or newer",
                  props_.name.c_str(), props_.major, props_.minor));
  LATHE_CUDA_TRY(cudaFree(nullptr));  // create the context before measuring free memory
  LATHE_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  size_t free_b = 0, total_b = 0;
  LATHE_CUDA_TRY(cudaMemGetInfo(&free_b, &total_b));
  free_at_start_ = static_cast<int64_t>(free_b);

  config_ = model.config;
  options_ = o;
  max_model_len_ =
      o.max_model_len > 0 ? o.max_model_len : static_cast<int32_t>(config_.max_position_embeddings);
  // 0 selects the GPU defaults (EngineConfig's convention): 8192 tokens, 256 sequences, blocks
  // of 16.
  max_tokens_ = o.max_num_batched_tokens > 0 ? o.max_num_batched_tokens : 8192;
  max_seqs_ = std::min(o.max_num_seqs > 0 ? o.max_num_seqs : 256, max_tokens_);
  block_size_ = o.block_size > 0 ? o.block_size : 16;
  const char* env = std::getenv("LATHE_CUDA_ATTENTION");
  force_own_attention_ = env != nullptr && std::string_view(env) == "own";
  // A/B switches and escape hatches (docs/gpu-notes.md): LATHE_CUDA_DECODE_ATTENTION=split keeps
  // decode on the split-KV kernel; LATHE_CUDA_FUSED=0 turns the fused batch-1..4 path off, =1 uses
  // it wherever it fits without timing it first.
  const char* dattn = std::getenv("LATHE_CUDA_DECODE_ATTENTION");
  decode_attention_ =
      !(dattn != nullptr && std::string_view(dattn) == "split") &&
      decode_attention_supports(config_.head_dim, config_.num_heads, config_.num_kv_heads);
  const char* fused = std::getenv("LATHE_CUDA_FUSED");
  fused_allowed_ = !(fused != nullptr && std::string_view(fused) == "0");
  fused_forced_ = fused != nullptr && std::string_view(fused) == "1";
  const char* fused_rope = std::getenv("LATHE_CUDA_FUSED_ROPE");
  fused_rope_allowed_ = !(fused_rope != nullptr && std::string_view(fused_rope) == "0");

  const auto t0 = Clock::now();
  LATHE_ASSIGN_OR_RETURN(weights_, upload_weights(model, o.dtype, o.dummy_seed, stream_));
  log_info(strformat("CUDA: %s of weights on %s in %.1f s",
                     format_bytes(static_cast<double>(weights_.storage.bytes())).c_str(),
                     props_.name.c_str(), us_since(t0) / 1e6));

  const std::vector<float> inv = rope_inverse_frequencies(config_);
  LATHE_RETURN_IF_ERROR(
      inv_freq_.allocate(static_cast<int64_t>(inv.size() * sizeof(float)), "RoPE frequencies"));
  LATHE_CUDA_TRY(
      cudaMemcpy(inv_freq_.get(), inv.data(), inv.size() * sizeof(float), cudaMemcpyHostToDevice));

  {
    // Before the activation buffers (sized by max-model-len too): can one sequence fit at all?
    size_t f = 0, t = 0;
    LATHE_CUDA_TRY(cudaMemGetInfo(&f, &t));
    const int64_t upper = static_cast<int64_t>(static_cast<double>(t) * o.gpu_memory_utilization) -
                          (static_cast<int64_t>(t) - static_cast<int64_t>(f));
    LATHE_RETURN_IF_ERROR(check_one_sequence_fits(upper));
  }
  LATHE_ASSIGN_OR_RETURN(gemm_, Gemm::create());
  linear_ = std::make_unique<LinearDispatcher>(gemm_.get(), o.dtype);
  LATHE_RETURN_IF_ERROR(create_prefill_attention());
  LATHE_RETURN_IF_ERROR(allocate_buffers());
  Status profiled = profile_step();
  if (!profiled.is_ok() && decode_attention_ && profiled.code() != ErrorCode::kOutOfMemory) {
    // The tensor-core decode kernel is new in run 2: keep the runner usable without it.
    log_warning("CUDA: the profiling step failed (" + profiled.message() +
                "); retrying with the split-KV decode attention kernel");
    cudaGetLastError();
    decode_attention_ = false;
    kv_.reset();
    LATHE_CUDA_TRY(cudaStreamSynchronize(stream_));
    profiled = profile_step();
  }
  if (!profiled.is_ok() && prefill_ != nullptr && profiled.code() != ErrorCode::kOutOfMemory) {
    // FlashInfer is the part of this backend not built here; keep the runner usable without it.
    log_warning("CUDA: the profiling step failed with FlashInfer prefill attention (" +
                profiled.message() + "); using Lathe's split-KV kernel for prefill");
    cudaGetLastError();
    prefill_.reset();
    kv_.reset();
    LATHE_CUDA_TRY(cudaStreamSynchronize(stream_));
    profiled = profile_step();
  }
  LATHE_RETURN_IF_ERROR(profiled);
  LATHE_RETURN_IF_ERROR(plan_memory());
  log_info("CUDA: " + plan_summary());
  return Status();
}

Status CudaModelRunner::create_prefill_attention() {
  prefill_.reset();
  const bool window_active = config_.sliding_window > 0 && max_model_len_ > config_.sliding_window;
  const int32_t window = window_active ? static_cast<int32_t>(config_.sliding_window) : 0;
  if (force_own_attention_ || !PrefillAttention::supports(options_.dtype, config_.head_dim, window))
    return Status();
  auto p = PrefillAttention::create(options_.dtype, static_cast<int32_t>(config_.num_heads),
                                    static_cast<int32_t>(config_.num_kv_heads),
                                    static_cast<int32_t>(config_.head_dim), block_size_,
                                    max_tokens_, max_seqs_);
  if (p.is_ok()) {
    prefill_ = std::move(p).value();
  } else if (p.status().code() != ErrorCode::kUnsupported) {
    return p.status();
  }
  return Status();
}

Status CudaModelRunner::allocate_buffers() {
  const ModelConfig& c = config_;
  const int64_t t = max_tokens_, s = max_seqs_, h = c.hidden_size, e = 2;
  const int64_t qkv_dim = c.q_size() + 2 * c.kv_size(), ffn = c.intermediate_size, v = c.vocab_size;
  LATHE_RETURN_IF_ERROR(residual_.allocate(t * h * 4, "residual stream"));
  LATHE_RETURN_IF_ERROR(xnorm_.allocate(t * h * e, "normalized activations"));
  LATHE_RETURN_IF_ERROR(qkv_.allocate(t * qkv_dim * e, "QKV activations"));
  LATHE_RETURN_IF_ERROR(attn_out_.allocate(t * c.q_size() * e, "attention output"));
  LATHE_RETURN_IF_ERROR(proj_out_.allocate(t * h * e, "projection output"));
  LATHE_RETURN_IF_ERROR(gate_up_.allocate(t * 2 * ffn * e, "gate/up activations"));
  LATHE_RETURN_IF_ERROR(act_.allocate(t * ffn * e, "MLP activations"));
  LATHE_RETURN_IF_ERROR(logits_.allocate(s * v * 4, "logits"));
  int64_t ws = 0;
  for (int64_t n = 1; n <= std::min<int64_t>(t, 8 * props_.sm_count); ++n)
    ws = std::max(ws, paged_attention_workspace_bytes(
                          n, c.num_heads, c.head_dim,
                          paged_attention_splits_for(n, c.num_kv_heads, props_.sm_count)));
  if (decode_attention_)
    for (int64_t n = 1; n <= s; ++n)
      ws = std::max(ws, decode_attention_workspace_bytes(
                            n, c.num_heads, c.head_dim,
                            decode_attention_splits_for(n, c.num_kv_heads, props_.sm_count)));
  LATHE_RETURN_IF_ERROR(
      attn_ws_.allocate(std::max<int64_t>(ws, 16), "attention split-KV workspace"));
  // Arrival counters of the decode kernel's split merge: zero, and left zero by every launch.
  LATHE_RETURN_IF_ERROR(
      attn_counters_.allocate(std::max<int64_t>(s * c.num_kv_heads * 4, 16), "attention counters"));
  LATHE_CUDA_TRY(cudaMemsetAsync(attn_counters_.get(), 0,
                                 static_cast<size_t>(attn_counters_.bytes()), stream_));
  LATHE_RETURN_IF_ERROR(counts_.allocate(s * v * 4, "sampler penalty counts"));
  LATHE_CUDA_TRY(cudaMemsetAsync(counts_.get(), 0, static_cast<size_t>(counts_.bytes()), stream_));
  const int64_t sampled_bytes = s * static_cast<int64_t>(sizeof(DeviceSampledToken));
  const int64_t top_bytes = s * kMaxTopLogprobs * static_cast<int64_t>(sizeof(DeviceTokenLogprob));
  LATHE_RETURN_IF_ERROR(sampled_.allocate(sampled_bytes, "sampled tokens"));
  LATHE_RETURN_IF_ERROR(top_.allocate(top_bytes, "top logprobs"));
  LATHE_RETURN_IF_ERROR(sampled_host_.allocate(sampled_bytes, "sampled tokens (host)"));
  LATHE_RETURN_IF_ERROR(top_host_.allocate(top_bytes, "top logprobs (host)"));
  return allocate_step_buffers();
}

Status CudaModelRunner::allocate_step_buffers() {
  limits_.max_tokens = max_tokens_;
  limits_.max_seqs = max_seqs_;
  limits_.block_size = block_size_;
  limits_.num_blocks = num_blocks_;
  limits_.max_pages =
      static_cast<int64_t>(max_seqs_) * ceil_div(max_model_len_, block_size_) + max_seqs_;
  limits_.vocab_size = config_.vocab_size;
  limits_.max_logprobs = kMaxTopLogprobs;
  const int64_t fixed = StepLayout::make(max_tokens_, max_seqs_).fixed_bytes;
  const int64_t tail =
      std::min(kMaxTailBytes, 4 * static_cast<int64_t>(max_seqs_) *
                                  (static_cast<int64_t>(max_model_len_) + kBannedPerRow));
  LATHE_RETURN_IF_ERROR(
      step_dev_.allocate(fixed + 4 * limits_.max_pages + tail + 64, "step inputs"));
  LATHE_RETURN_IF_ERROR(
      step_host_.allocate(fixed + 4 * limits_.max_pages + kInitialTailBytes, "step inputs (host)"));
  return Status();
}

Status CudaModelRunner::profile_step() {
  // A one-block cache: every page of the profiling steps is block 0 and no token writes K/V (slot
  // -1), which exercises every kernel at full size without a real cache.
  LATHE_RETURN_IF_ERROR(kv_.allocate(kv_block_bytes(block_size_), "profiling KV block"));
  LATHE_CUDA_TRY(cudaMemsetAsync(kv_.get(), 0, static_cast<size_t>(kv_.bytes()), stream_));
  num_blocks_ = 1;
  limits_.num_blocks = 1;
  kv_layer_elems_ = static_cast<int64_t>(block_size_) * config_.num_kv_heads * config_.head_dim;

  auto make_step = [&](int32_t num_seqs, int32_t first_len) {
    ModelInput in;
    std::vector<int32_t> lens(static_cast<size_t>(num_seqs), 1);
    lens[0] = first_len;
    int32_t max_len = 0;
    for (int32_t l : lens) max_len = std::max(max_len, l);
    in.max_blocks_per_seq = static_cast<int32_t>(ceil_div(max_len, block_size_));
    in.query_start.push_back(0);
    for (int32_t s = 0; s < num_seqs; ++s) {
      for (int32_t p = 0; p < lens[s]; ++p) {
        in.token_ids.push_back(static_cast<int32_t>(
            (static_cast<int64_t>(in.token_ids.size()) * 7919 + 1) % config_.vocab_size));
        in.positions.push_back(p);
        in.slot_mapping.push_back(-1);
      }
      in.query_start.push_back(static_cast<int32_t>(in.token_ids.size()));
      in.seq_lens.push_back(lens[s]);
      in.sample_seqs.push_back(s);
      SamplingRow row;
      row.temperature = 0.8f;
      row.top_k = 40;
      row.top_p = 0.9f;
      row.min_p = 0.05f;
      row.seed = static_cast<uint64_t>(s);
      row.num_logprobs = s == 0 ? 5 : -1;
      in.sampling.push_back(row);
    }
    in.block_tables.assign(static_cast<size_t>(num_seqs) * in.max_blocks_per_seq, 0);
    in.max_seq_len = max_len;
    in.max_query_len = max_len;
    return in;
  };
  // The largest step: max_tokens tokens over max_seqs sequences (one long prefill chunk and
  // decodes).
  const int32_t first = std::min(max_tokens_ - (max_seqs_ - 1), max_model_len_);
  ModelInput big = make_step(max_seqs_, std::max(1, first));
  LATHE_RETURN_IF_ERROR(execute(big).status());
  // A decode step of max_seqs sequences (the split-KV decode kernel and the sampler at full width).
  ModelInput dec = make_step(max_seqs_, 1);
  LATHE_RETURN_IF_ERROR(execute(dec).status());

  // gemv or cuBLASLt for each small batch size, timed on the real weights.
  const ModelConfig& c = config_;
  const DeviceLayer& l0 = weights_.layers[0];
  const int64_t qkv_dim = c.q_size() + 2 * c.kv_size();
  std::vector<std::pair<LinearWeight, DType>> shapes = {
      {LinearWeight{l0.qkv, qkv_dim, c.hidden_size, "qkv_proj"}, options_.dtype},
      {LinearWeight{l0.o, c.hidden_size, c.q_size(), "o_proj"}, options_.dtype},
      {LinearWeight{l0.gate_up, 2 * c.intermediate_size, c.hidden_size, "gate_up_proj"},
       options_.dtype},
      {LinearWeight{l0.down, c.hidden_size, c.intermediate_size, "down_proj"}, options_.dtype},
      {LinearWeight{weights_.lm_head, c.vocab_size, c.hidden_size, "lm_head"}, DType::kF32}};
  int64_t max_k = 0, max_n = 0;
  for (const auto& [w, out] : shapes) max_k = std::max(max_k, w.k), max_n = std::max(max_n, w.n);
  {
    DeviceBuffer x, y;
    LATHE_RETURN_IF_ERROR(x.allocate(kGemvMaxM * max_k * 2, "linear autotune input"));
    LATHE_RETURN_IF_ERROR(y.allocate(kGemvMaxM * max_n * 4, "linear autotune output"));
    LATHE_RETURN_IF_ERROR(linear_->autotune(shapes, x.get(), y.get(), stream_));
    const Status tuned = tune_fused_decode(x.get(), y.get());
    if (!tuned.is_ok()) {
      // The fused batch-1..4 path is optional: without it the unfused path serves every step.
      if (fused_forced_) return tuned;
      log_warning("CUDA: the fused batch-1..4 decode path is off: " + tuned.message());
      cudaGetLastError();
      fused_.fill(FusedDecodeChoice{});
      fused_report_.clear();
    }
    LATHE_CUDA_TRY(cudaStreamSynchronize(stream_));
  }
  kv_.reset();
  num_blocks_ = 0;
  limits_.num_blocks = 0;
  return Status();
}

Status CudaModelRunner::plan_memory() {
  size_t free_b = 0, total_b = 0;
  LATHE_CUDA_TRY(cudaMemGetInfo(&free_b, &total_b));
  const int64_t total = static_cast<int64_t>(total_b), free_now = static_cast<int64_t>(free_b);
  const int64_t weight_bytes = weights_.storage.bytes();
  const int64_t used = free_at_start_ - free_now;
  memory_.device_name =
      strformat("%s (%s)", props_.name.c_str(), format_bytes(static_cast<double>(total)).c_str());
  memory_.total_bytes = total;
  memory_.weight_bytes = weight_bytes;
  memory_.activation_bytes = std::max<int64_t>(0, used - weight_bytes);
  const int64_t allowed =
      static_cast<int64_t>(static_cast<double>(total) * options_.gpu_memory_utilization);
  const int64_t reserve = options_.enforce_eager ? 0 : kGraphReserveBytes;
  const int64_t budget = allowed - (total - free_now) - reserve;
  memory_.kv_budget_bytes = std::max<int64_t>(0, budget);

  return check_one_sequence_fits(memory_.kv_budget_bytes);
}

Status CudaModelRunner::check_one_sequence_fits(int64_t kv_budget) const {
  const int64_t per_token = config_.kv_bytes_per_token(2);
  const int64_t one_seq = ceil_div(max_model_len_, block_size_) * kv_block_bytes(block_size_);
  if (one_seq <= kv_budget) return Status();
  const int64_t fits = std::max<int64_t>(0, kv_budget) / per_token / block_size_ * block_size_;
  const std::string head = strformat(
      "max-model-len %d needs %s of KV cache for one sequence; %s are free after weights (%s) and "
      "activations (%s) "
      "under --gpu-memory-utilization %.2f of %s",
      max_model_len_, format_bytes(static_cast<double>(one_seq)).c_str(),
      format_bytes(static_cast<double>(std::max<int64_t>(0, kv_budget))).c_str(),
      format_bytes(static_cast<double>(weights_.storage.bytes())).c_str(),
      format_bytes(static_cast<double>(memory_.activation_bytes)).c_str(),
      options_.gpu_memory_utilization,
      format_bytes(static_cast<double>(props_.total_bytes)).c_str());
  if (fits >= block_size_)
    return out_of_memory(
        head + strformat("; use --max-model-len <= %lld or raise --gpu-memory-utilization",
                         static_cast<long long>(fits)));
  return out_of_memory(
      head +
      "; raise --gpu-memory-utilization, lower --max-num-batched-tokens or --max-num-seqs, "
      "or use a smaller (or quantized) model");
}

std::string CudaModelRunner::plan_summary() const {
  std::string s =
      strformat("%s, %s, weights %s, activations %s, KV budget %s, prefill attention %s, ",
                memory_.device_name.c_str(), std::string(dtype_name(options_.dtype)).c_str(),
                format_bytes(static_cast<double>(memory_.weight_bytes)).c_str(),
                format_bytes(static_cast<double>(memory_.activation_bytes)).c_str(),
                format_bytes(static_cast<double>(memory_.kv_budget_bytes)).c_str(),
                prefill_ ? "FlashInfer FA2" : "Lathe split-KV");
  s += strformat("decode attention %s, ",
                 decode_attention_ ? "tensor-core GQA (decode_attention)" : "Lathe split-KV");
  std::string fused;
  for (const FusedDecodeChoice& ch : fused_report_) {
    if (!ch.use) continue;
    if (!fused.empty()) fused += ',';
    fused += std::to_string(ch.m);
  }
  s += "fused decode projections for batch ";
  s += fused.empty() ? std::string("none") : fused;
  s += ", ";
  if (options_.enforce_eager) {
    s += "eager (no CUDA graphs)";
  } else {
    s += strformat("CUDA graphs for decode batches up to %d", max_seqs_);
  }
  return s;
}

int32_t CudaModelRunner::bucket_for(int32_t num_seqs) const {
  for (int32_t b : buckets_)
    if (b >= num_seqs) return graphs_.count(b) != 0 ? b : 0;
  return 0;
}

Status CudaModelRunner::allocate_kv_cache(int32_t num_blocks, int32_t block_size) {
  if (num_blocks <= 0 || block_size <= 0)
    return invalid_argument(strformat(
        "KV cache needs num_blocks > 0 and block_size > 0, got %d and %d", num_blocks, block_size));
  LATHE_CUDA_TRY(cudaStreamSynchronize(stream_));
  for (auto& [b, g] : graphs_) cudaGraphExecDestroy(g);
  graphs_.clear();
  for (auto& [b, g] : profile_graphs_) cudaGraphExecDestroy(g);
  profile_graphs_.clear();
  kv_.reset();
  num_blocks_ = 0;
  if (block_size != block_size_) {
    block_size_ = block_size;
    LATHE_RETURN_IF_ERROR(allocate_step_buffers());
    if (prefill_) LATHE_RETURN_IF_ERROR(create_prefill_attention());  // FlashInfer plans in pages
  }
  const int64_t bytes = kv_block_bytes(block_size) * num_blocks;
  LATHE_RETURN_IF_ERROR(kv_.allocate(bytes, strformat("KV cache of %d blocks", num_blocks)));
  // Zeros: attention never reads a position before it is written, but a partly filled last page is
  // loaded whole by the tiled kernels (and masked), so it must not hold NaN bit patterns.
  LATHE_CUDA_TRY(cudaMemsetAsync(kv_.get(), 0, static_cast<size_t>(bytes), stream_));
  num_blocks_ = num_blocks;
  kv_layer_elems_ =
      static_cast<int64_t>(num_blocks) * block_size * config_.num_kv_heads * config_.head_dim;
  limits_.num_blocks = num_blocks;
  limits_.block_size = block_size;
  if (!options_.enforce_eager) LATHE_RETURN_IF_ERROR(capture_graphs());
  LATHE_CUDA_TRY(cudaStreamSynchronize(stream_));
  return Status();
}

namespace {

// A decode step of `b` sequences of one token each at position 0 (used to warm up and capture).
ModelInput dummy_decode(int32_t b) {
  ModelInput in;
  for (int32_t s = 0; s < b; ++s) {
    in.token_ids.push_back(0);
    in.positions.push_back(0);
    in.slot_mapping.push_back(-1);
    in.query_start.push_back(s);
    in.seq_lens.push_back(1);
  }
  in.query_start.push_back(b);
  in.max_blocks_per_seq = 1;
  in.block_tables.assign(static_cast<size_t>(b), 0);
  in.max_seq_len = 1;
  in.max_query_len = 1;
  return in;
}

}  // namespace

Status CudaModelRunner::capture_one(int32_t b, bool with_events, cudaGraphExec_t* exec) {
  const ModelInput in = dummy_decode(b);
  LATHE_RETURN_IF_ERROR(check_step(in, limits_));
  LATHE_RETURN_IF_ERROR(pack_step(in, limits_, b, true, step_host_.as<uint8_t>(),
                                  step_host_.bytes(), step_dev_.bytes(), &packed_));
  LATHE_CUDA_TRY(cudaMemcpyAsync(step_dev_.get(), step_host_.get(),
                                 static_cast<size_t>(packed_.bytes), cudaMemcpyHostToDevice,
                                 stream_));
  const StepArrays d = StepArrays::at(step_dev_.get(), packed_.layout);
  const int32_t splits = paged_attention_splits_for(b, config_.num_kv_heads, props_.sm_count);
  // Warm-up outside the capture: loads modules and caches cuBLASLt plans.
  recording_ = false;
  LATHE_RETURN_IF_ERROR(forward(d, b, b, b, AttnPath::kDecode, splits));
  LATHE_CUDA_TRY(cudaStreamSynchronize(stream_));
  if (with_events) LATHE_RETURN_IF_ERROR(ensure_events());
  LATHE_CUDA_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  capturing_ = true;
  recording_ = with_events;
  Status s = with_events ? record_start() : Status();
  if (s.is_ok()) s = forward(d, b, b, b, AttnPath::kDecode, splits);
  recording_ = false;
  capturing_ = false;
  if (with_events) profile_graph_events_ = events_used_;
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
  if (!s.is_ok()) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    cudaGetLastError();  // a failed capture leaves its error behind; later launches must not see it
    return s.with_context(strformat("capturing the decode graph of batch %d", b));
  }
  if (end != cudaSuccess)
    return cuda_error(end, strformat("cudaStreamEndCapture (decode batch %d)", b));
  const cudaError_t inst = cudaGraphInstantiate(exec, graph, 0);
  cudaGraphDestroy(graph);
  if (inst != cudaSuccess)
    return cuda_error(inst, strformat("cudaGraphInstantiate (decode batch %d)", b));
  return Status();
}

Status CudaModelRunner::capture_graphs() {
  buckets_.clear();
  const int32_t limit = std::min(max_seqs_, max_tokens_);
  for (int32_t b : {1, 2, 4})
    if (b <= limit) buckets_.push_back(b);
  for (int32_t b = 8; b <= limit; b += 8) buckets_.push_back(b);
  if (buckets_.empty() || buckets_.back() != limit) buckets_.push_back(limit);
  const auto t0 = Clock::now();
  for (int32_t b : buckets_) {
    cudaGraphExec_t exec = nullptr;
    Status s = capture_one(b, false, &exec);
    if (!s.is_ok() && pdl_enabled()) {
      // Graph capture of programmatic (PDL) edges is the newest feature used here: fall back to
      // ordinary launches before giving up on graphs.
      log_warning("CUDA: capturing a decode graph with programmatic dependent launch failed (" +
                  s.message() + "); capturing without it");
      disable_pdl();
      for (auto& [bb, g] : graphs_) cudaGraphExecDestroy(g);
      graphs_.clear();
      return capture_graphs();
    }
    if (!s.is_ok()) {
      log_warning("CUDA: decode graphs unavailable (" + s.message() +
                  "); decode steps run eagerly");
      for (auto& [bb, g] : graphs_) cudaGraphExecDestroy(g);
      graphs_.clear();
      return Status();
    }
    graphs_[b] = exec;
  }
  log_info(strformat("CUDA: captured %zu decode graphs (batch 1..%d) in %.2f s", buckets_.size(),
                     limit, us_since(t0) / 1e6));
  return Status();
}

Status CudaModelRunner::attention(const StepArrays& d, int64_t li, int32_t t, int32_t s,
                                  AttnPath path, int32_t splits) {
  const ModelConfig& c = config_;
  const int64_t hq = c.num_heads, hkv = c.num_kv_heads, hd = c.head_dim;
  const int64_t qkv_dim = (hq + 2 * hkv) * hd;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  uint8_t* k_cache = kv_.as<uint8_t>() + 2 * li * kv_layer_elems_ * 2;
  uint8_t* v_cache = k_cache + kv_layer_elems_ * 2;
  if (path == AttnPath::kFlashInfer) {
    PrefillRunArgs pa;
    pa.q = qkv_.get();
    pa.q_stride = qkv_dim;
    pa.out = attn_out_.get();
    pa.k_cache = k_cache;
    pa.v_cache = v_cache;
    pa.qo_indptr = d.query_start;
    pa.kv_indptr = d.kv_indptr;
    pa.kv_indices = d.kv_indices;
    pa.kv_last_page_len = d.kv_last_page_len;
    pa.scale = scale;
    return prefill_->run(pa, stream_);
  }
  if (path == AttnPath::kDecode && decode_attention_) {
    DecodeAttentionArgs da;
    da.q = qkv_.get();
    da.q_stride = qkv_dim;
    da.out = attn_out_.get();
    da.k_cache = k_cache;
    da.v_cache = v_cache;
    da.seq_lens = d.seq_lens;
    da.kv_indptr = d.kv_indptr;
    da.kv_indices = d.kv_indices;
    da.num_seqs = s;
    da.num_heads = static_cast<int32_t>(hq);
    da.num_kv_heads = static_cast<int32_t>(hkv);
    da.head_dim = static_cast<int32_t>(hd);
    da.block_size = block_size_;
    da.scale = scale;
    da.sliding_window = static_cast<int32_t>(c.sliding_window);
    da.max_splits = decode_attention_splits_for(s, hkv, props_.sm_count);
    da.workspace = attn_ws_.as<float>();
    da.counters = attn_counters_.as<int32_t>();
    da.dtype = options_.dtype;
    return decode_attention(da, stream_);
  }
  PagedAttentionArgs pa;
  pa.q = qkv_.get();
  pa.q_stride = qkv_dim;
  pa.out = attn_out_.get();
  pa.k_cache = k_cache;
  pa.v_cache = v_cache;
  pa.query_start = d.query_start;
  pa.seq_lens = d.seq_lens;
  pa.kv_indptr = d.kv_indptr;
  pa.kv_indices = d.kv_indices;
  pa.num_seqs = s;
  pa.num_tokens = t;
  pa.num_heads = static_cast<int32_t>(hq);
  pa.num_kv_heads = static_cast<int32_t>(hkv);
  pa.head_dim = static_cast<int32_t>(hd);
  pa.block_size = block_size_;
  pa.scale = scale;
  pa.sliding_window = static_cast<int32_t>(c.sliding_window);
  pa.max_splits = splits;
  pa.workspace = attn_ws_.as<float>();
  pa.dtype = options_.dtype;
  return paged_attention(pa, stream_);
}

Status CudaModelRunner::forward(const StepArrays& d, int32_t t, int32_t s, int32_t r, AttnPath path,
                                int32_t splits) {
  const ModelConfig& c = config_;
  const DType dt = options_.dtype;
  const int64_t h = c.hidden_size, hq = c.num_heads, hkv = c.num_kv_heads, hd = c.head_dim;
  const int64_t qkv_dim = (hq + 2 * hkv) * hd, ffn = c.intermediate_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const int64_t e = 2;
  const LinearWeight lm{weights_.lm_head, c.vocab_size, h, "lm_head"};
  // The fused batch-1..4 path (decode_gemv.h): the residual stream is updated by the o/down
  // epilogues, the norms run in the QKV, gate/up and LM-head prologues, SwiGLU in the gate/up
  // epilogue.
  const FusedDecodeChoice* fused =
      t >= 1 && t <= kDecodeGemvMaxM && fused_[static_cast<size_t>(t)].use
          ? &fused_[static_cast<size_t>(t)]
          : nullptr;
  DecodeGemvArgs g;
  g.dtype = dt;
  g.m = t;
  g.eps = eps;
  g.residual = residual_.as<float>();
  g.out_dtype = dt;

  LATHE_RETURN_IF_ERROR(embedding(dt, weights_.token_embd, c.vocab_size, h, d.token_ids, t,
                                  residual_.as<float>(), stream_));
  LATHE_RETURN_IF_ERROR(mark(Phase::kEmbedding));
  for (int64_t li = 0; li < c.num_layers; ++li) {
    const DeviceLayer& L = weights_.layers[static_cast<size_t>(li)];
    uint8_t* k_cache = kv_.as<uint8_t>() + 2 * li * kv_layer_elems_ * e;
    uint8_t* v_cache = k_cache + kv_layer_elems_ * e;

    AddRmsNormArgs norm;
    norm.residual = residual_.as<float>();
    norm.x = li == 0 ? nullptr : proj_out_.get();
    norm.weight = L.attn_norm;
    norm.out = xnorm_.get();
    norm.rows = t;
    norm.dim = h;
    norm.eps = eps;
    norm.dtype = dt;
    if (fused != nullptr) {
      g.w = L.qkv, g.n = qkv_dim, g.k = h;
      g.input = GemvInput::kRmsNorm, g.norm_weight = L.attn_norm, g.row_index = nullptr;
      g.output = fused->rope ? GemvOutput::kRopeKv : GemvOutput::kStore, g.y = qkv_.get();
      if (fused->rope) {
        GemvRopeKv& rp = g.rope;
        rp.num_heads = static_cast<int32_t>(hq);
        rp.num_kv_heads = static_cast<int32_t>(hkv);
        rp.head_dim = static_cast<int32_t>(hd);
        rp.positions = d.positions;
        rp.inv_freq = inv_freq_.as<float>();
        rp.style = c.rope_style;
        rp.q_bias = L.q_bias, rp.k_bias = L.k_bias, rp.v_bias = L.v_bias;
        rp.k_cache = k_cache, rp.v_cache = v_cache;
        rp.slot_mapping = d.slot_mapping;
      }
      g.blocks_per_sm = fused->blocks_per_sm[0];
      LATHE_RETURN_IF_ERROR(decode_gemv(g, stream_));
    } else {
      LATHE_RETURN_IF_ERROR(add_rms_norm(norm, stream_));
      LATHE_RETURN_IF_ERROR(mark(Phase::kNorm));
      LATHE_RETURN_IF_ERROR(linear_->run(LinearWeight{L.qkv, qkv_dim, h, "qkv_proj"}, dt,
                                         xnorm_.get(), qkv_.get(), t, stream_));
    }
    LATHE_RETURN_IF_ERROR(mark(Phase::kQkvGemm));

    QkvRopeKvArgs rk;
    rk.qkv = qkv_.get();
    rk.num_tokens = t;
    rk.num_heads = hq;
    rk.num_kv_heads = hkv;
    rk.head_dim = hd;
    rk.positions = d.positions;
    rk.inv_freq = inv_freq_.as<float>();
    rk.style = c.rope_style;
    rk.q_bias = L.q_bias;
    rk.k_bias = L.k_bias;
    rk.v_bias = L.v_bias;
    rk.q_norm = L.q_norm;
    rk.k_norm = L.k_norm;
    rk.eps = eps;
    rk.k_cache = k_cache;
    rk.v_cache = v_cache;
    rk.slot_mapping = d.slot_mapping;
    rk.dtype = dt;
    if (fused == nullptr || !fused->rope) {
      LATHE_RETURN_IF_ERROR(qkv_rope_kv(rk, stream_));
      LATHE_RETURN_IF_ERROR(mark(Phase::kRopeKv));
    }

    LATHE_RETURN_IF_ERROR(attention(d, li, t, s, path, splits));
    LATHE_RETURN_IF_ERROR(mark(Phase::kAttention));

    if (fused != nullptr) {
      g.w = L.o, g.n = h, g.k = hq * hd;
      g.input = GemvInput::kPlain, g.x = attn_out_.get();
      g.output = GemvOutput::kResidualAdd, g.residual_out = residual_.as<float>();
      g.blocks_per_sm = fused->blocks_per_sm[1];
      LATHE_RETURN_IF_ERROR(decode_gemv(g, stream_));
      LATHE_RETURN_IF_ERROR(mark(Phase::kOGemm));

      g.w = L.gate_up, g.n = 2 * ffn, g.k = h;
      g.input = GemvInput::kRmsNorm, g.norm_weight = L.ffn_norm;
      g.output = GemvOutput::kSwiglu, g.y = act_.get();
      g.blocks_per_sm = fused->blocks_per_sm[2];
      LATHE_RETURN_IF_ERROR(decode_gemv(g, stream_));
      LATHE_RETURN_IF_ERROR(mark(Phase::kGateUpGemm));

      g.w = L.down, g.n = h, g.k = ffn;
      g.input = GemvInput::kPlain, g.x = act_.get();
      g.output = GemvOutput::kResidualAdd, g.residual_out = residual_.as<float>();
      g.blocks_per_sm = fused->blocks_per_sm[3];
      LATHE_RETURN_IF_ERROR(decode_gemv(g, stream_));
      LATHE_RETURN_IF_ERROR(mark(Phase::kDownGemm));
      continue;
    }

    LATHE_RETURN_IF_ERROR(linear_->run(LinearWeight{L.o, h, hq * hd, "o_proj"}, dt, attn_out_.get(),
                                       proj_out_.get(), t, stream_));
    LATHE_RETURN_IF_ERROR(mark(Phase::kOGemm));

    norm.x = proj_out_.get();
    norm.weight = L.ffn_norm;
    LATHE_RETURN_IF_ERROR(add_rms_norm(norm, stream_));
    LATHE_RETURN_IF_ERROR(mark(Phase::kNorm));

    LATHE_RETURN_IF_ERROR(linear_->run(LinearWeight{L.gate_up, 2 * ffn, h, "gate_up_proj"}, dt,
                                       xnorm_.get(), gate_up_.get(), t, stream_));
    LATHE_RETURN_IF_ERROR(mark(Phase::kGateUpGemm));
    LATHE_RETURN_IF_ERROR(swiglu(dt, gate_up_.get(), act_.get(), t, ffn, stream_));
    LATHE_RETURN_IF_ERROR(mark(Phase::kSwiglu));
    LATHE_RETURN_IF_ERROR(linear_->run(LinearWeight{L.down, h, ffn, "down_proj"}, dt, act_.get(),
                                       proj_out_.get(), t, stream_));
    LATHE_RETURN_IF_ERROR(mark(Phase::kDownGemm));
  }
  if (r == 0) return Status();
  if (fused != nullptr && fused->lm_head) {
    g.w = weights_.lm_head, g.n = c.vocab_size, g.k = h, g.m = r;
    g.input = GemvInput::kRmsNorm, g.norm_weight = weights_.output_norm, g.row_index = d.lm_rows;
    g.output = GemvOutput::kStore, g.y = logits_.get(), g.out_dtype = DType::kF32;
    g.blocks_per_sm = fused->blocks_per_sm[4];
    LATHE_RETURN_IF_ERROR(decode_gemv(g, stream_));
    return mark(Phase::kLmHead);
  }
  AddRmsNormArgs fin;
  fin.residual = residual_.as<float>();
  // After fused layers the residual already holds the last down projection.
  fin.x = fused != nullptr ? nullptr : proj_out_.get();
  fin.weight = weights_.output_norm;
  fin.out = xnorm_.get();
  fin.row_index = d.lm_rows;
  fin.rows = r;
  fin.dim = h;
  fin.eps = eps;
  fin.dtype = dt;
  LATHE_RETURN_IF_ERROR(add_rms_norm(fin, stream_));
  LATHE_RETURN_IF_ERROR(mark(Phase::kNorm));
  LATHE_RETURN_IF_ERROR(linear_->run(lm, DType::kF32, xnorm_.get(), logits_.get(), r, stream_));
  return mark(Phase::kLmHead);
}

Status CudaModelRunner::ensure_events() {
  if (!events_.empty()) return Status();
  // Enough for the largest step: a start, 9 marks per layer, 4 more and the sampler.
  const size_t n = static_cast<size_t>(config_.num_layers) * 9 + 8;
  events_.resize(n, nullptr);
  event_phase_.resize(n, Phase::kCount);
  for (cudaEvent_t& ev : events_) LATHE_CUDA_TRY(cudaEventCreate(&ev));
  return Status();
}

Status CudaModelRunner::record_event(Phase p) {
  if (events_used_ >= events_.size()) return internal_error("profiling: out of events");
  // In a capture, an external record node, so that the replayed graph records the event itself.
  LATHE_CUDA_TRY(
      cudaEventRecordWithFlags(events_[events_used_], stream_,
                               capturing_ ? cudaEventRecordExternal : cudaEventRecordDefault));
  event_phase_[events_used_] = p;
  ++events_used_;
  return Status();
}

Status CudaModelRunner::record_start() {
  LATHE_RETURN_IF_ERROR(ensure_events());
  events_used_ = 0;
  return record_event(Phase::kCount);
}

Status CudaModelRunner::mark(Phase p) {
  if (!recording_) return Status();
  return record_event(p);
}

Status CudaModelRunner::collect_profile() {
  for (size_t i = 1; i < events_used_; ++i) {
    float ms = 0.f;
    LATHE_CUDA_TRY(cudaEventElapsedTime(&ms, events_[i - 1], events_[i]));
    phase_ms_[static_cast<size_t>(event_phase_[i])] += ms;
  }
  ++profiled_steps_;
  return Status();
}

void CudaModelRunner::set_profiling(bool on) {
  profiling_ = on;
}

void CudaModelRunner::reset_profile() {
  phase_ms_.fill(0.0);
  profiled_steps_ = 0;
}

Status CudaModelRunner::run_forward(const ModelInput& in) {
  if (kv_.get() == nullptr)
    return internal_error("allocate_kv_cache() must be called before execute()");
  const auto t0 = Clock::now();
  LATHE_RETURN_IF_ERROR(check_step(in, limits_));
  const int32_t s_count = in.num_seqs(), t_count = in.num_tokens();
  const bool decode = t_count == s_count;
  int32_t bucket = decode && !options_.enforce_eager ? bucket_for(s_count) : 0;
  const bool graph = bucket > 0;
  const int64_t need = step_bytes(in, limits_, bucket);
  if (need > step_host_.bytes()) {
    LATHE_CUDA_TRY(cudaStreamSynchronize(stream_));
    LATHE_RETURN_IF_ERROR(
        step_host_.allocate(std::max(need, 2 * step_host_.bytes()), "step inputs (host)"));
  }
  LATHE_RETURN_IF_ERROR(pack_step(in, limits_, bucket, graph, step_host_.as<uint8_t>(),
                                  step_host_.bytes(), step_dev_.bytes(), &packed_));
  times_.prepare_us = us_since(t0);
  times_.bucket = bucket;

  const auto t1 = Clock::now();
  LATHE_CUDA_TRY(cudaMemcpyAsync(step_dev_.get(), step_host_.get(),
                                 static_cast<size_t>(packed_.bytes), cudaMemcpyHostToDevice,
                                 stream_));
  const StepArrays d = StepArrays::at(step_dev_.get(), packed_.layout);
  recording_ = false;
  bool replayed = false;
  if (graph) {
    cudaGraphExec_t exec = graphs_.at(bucket);
    if (profiling_ && !profile_graphs_failed_) {
      auto it = profile_graphs_.find(bucket);
      if (it == profile_graphs_.end()) {
        // Captured on first use: the same kernels with event records between phases.
        cudaGraphExec_t pg = nullptr;
        const Status cs = capture_one(bucket, true, &pg);
        // capture_one packed its own dummy step: pack and copy this step again.
        LATHE_RETURN_IF_ERROR(pack_step(in, limits_, bucket, graph, step_host_.as<uint8_t>(),
                                        step_host_.bytes(), step_dev_.bytes(), &packed_));
        LATHE_CUDA_TRY(cudaMemcpyAsync(step_dev_.get(), step_host_.get(),
                                       static_cast<size_t>(packed_.bytes), cudaMemcpyHostToDevice,
                                       stream_));
        if (cs.is_ok()) {
          it = profile_graphs_.emplace(bucket, pg).first;
        } else {
          log_warning("CUDA: profiling with event nodes in graphs failed (" + cs.message() +
                      "); profiling decode steps eagerly");
          profile_graphs_failed_ = true;
        }
      }
      if (it != profile_graphs_.end()) {
        exec = it->second;
        events_used_ = profile_graph_events_;
      }
    }
    if (!profiling_ || !profile_graphs_failed_) {
      LATHE_CUDA_TRY(cudaGraphLaunch(exec, stream_));
      last_path_ = AttnPath::kDecode;
      replayed = true;
    }
  }
  times_.graph = replayed;
  if (!replayed) {
    AttnPath path =
        decode ? AttnPath::kDecode : (prefill_ ? AttnPath::kFlashInfer : AttnPath::kOwn);
    if (path == AttnPath::kFlashInfer) {
      const StepArrays h = StepArrays::at(step_host_.get(), packed_.layout);
      LATHE_RETURN_IF_ERROR(prefill_->plan(h.query_start, h.kv_indptr, s_count, stream_));
    }
    const int32_t splits =
        path == AttnPath::kFlashInfer
            ? 1
            : paged_attention_splits_for(t_count, config_.num_kv_heads, props_.sm_count);
    if (profiling_) {
      recording_ = true;
      LATHE_RETURN_IF_ERROR(record_start());
    }
    Status st = forward(d, packed_.num_tokens, packed_.num_seqs, packed_.num_lm_rows, path, splits);
    recording_ = false;
    LATHE_RETURN_IF_ERROR(st);
    last_path_ = path;
  }
  times_.launch_us = us_since(t1);
  return Status();
}

Status CudaModelRunner::sample() {
  const int32_t n = packed_.num_samples;
  if (n == 0) return Status();
  const DeviceSamplingRow* rows = StepArrays::at(step_dev_.get(), packed_.layout).sampling;
  const int32_t* banned =
      reinterpret_cast<const int32_t*>(step_dev_.as<uint8_t>() + packed_.banned_offset);
  const int32_t* history =
      reinterpret_cast<const int32_t*>(step_dev_.as<uint8_t>() + packed_.history_offset);
  if (packed_.needs_processing)
    LATHE_RETURN_IF_ERROR(process_logits(logits_.as<float>(), config_.vocab_size, rows, n, banned,
                                         history, counts_.as<int32_t>(), stream_));
  LATHE_RETURN_IF_ERROR(sample_tokens(logits_.as<float>(), config_.vocab_size, rows, n,
                                      sampled_.as<DeviceSampledToken>(),
                                      top_.as<DeviceTokenLogprob>(), stream_));
  if (profiling_) {
    recording_ = true;
    LATHE_RETURN_IF_ERROR(mark(Phase::kSampler));
    recording_ = false;
  }
  LATHE_CUDA_TRY(cudaMemcpyAsync(sampled_host_.get(), sampled_.get(),
                                 sizeof(DeviceSampledToken) * n, cudaMemcpyDeviceToHost, stream_));
  if (packed_.needs_logprobs)
    LATHE_CUDA_TRY(cudaMemcpyAsync(top_host_.get(), top_.get(),
                                   sizeof(DeviceTokenLogprob) * kMaxTopLogprobs * n,
                                   cudaMemcpyDeviceToHost, stream_));
  return Status();
}

Result<ModelOutput> CudaModelRunner::execute(const ModelInput& input) {
  LATHE_RETURN_IF_ERROR(run_forward(input));
  const auto t1 = Clock::now();
  LATHE_RETURN_IF_ERROR(sample());
  times_.launch_us += us_since(t1);
  const auto t2 = Clock::now();
  LATHE_CUDA_TRY(cudaStreamSynchronize(stream_));
  times_.wait_us = us_since(t2);
  if (profiling_) LATHE_RETURN_IF_ERROR(collect_profile());

  const auto t3 = Clock::now();
  ModelOutput out;
  const int32_t n = packed_.num_samples;
  out.tokens.resize(static_cast<size_t>(n));
  const DeviceSampledToken* st = sampled_host_.as<DeviceSampledToken>();
  const DeviceTokenLogprob* top = top_host_.as<DeviceTokenLogprob>();
  for (int32_t i = 0; i < n; ++i) {
    SampledToken& o = out.tokens[static_cast<size_t>(i)];
    o.token = st[i].token;
    const int32_t k = input.sampling[static_cast<size_t>(i)].num_logprobs;
    if (k >= 0) {
      o.logprob = st[i].logprob;
      const int64_t m = std::min<int64_t>(k, config_.vocab_size);
      o.top_logprobs.reserve(static_cast<size_t>(m));
      for (int64_t j = 0; j < m; ++j) {
        const DeviceTokenLogprob& tl = top[static_cast<int64_t>(i) * kMaxTopLogprobs + j];
        o.top_logprobs.push_back(TokenLogprob{tl.token, tl.logprob});
      }
    }
  }
  times_.finish_us = us_since(t3);
  return out;
}

Result<std::vector<float>> CudaModelRunner::compute_logits(const ModelInput& input) {
  LATHE_RETURN_IF_ERROR(run_forward(input));
  const int64_t v = config_.vocab_size;
  std::vector<float> rows(static_cast<size_t>(packed_.num_lm_rows) * static_cast<size_t>(v));
  LATHE_CUDA_TRY(cudaMemcpyAsync(rows.data(), logits_.get(), rows.size() * sizeof(float),
                                 cudaMemcpyDeviceToHost, stream_));
  LATHE_CUDA_TRY(cudaStreamSynchronize(stream_));
  if (profiling_) LATHE_RETURN_IF_ERROR(collect_profile());
  if (!times_.graph) {
    rows.resize(input.sample_seqs.size() * static_cast<size_t>(v));
    return rows;
  }
  std::vector<float> out(input.sample_seqs.size() * static_cast<size_t>(v));
  for (size_t i = 0; i < input.sample_seqs.size(); ++i)
    std::memcpy(out.data() + i * v, rows.data() + static_cast<int64_t>(input.sample_seqs[i]) * v,
                sizeof(float) * v);
  return out;
}

}  // namespace lathe::cuda
