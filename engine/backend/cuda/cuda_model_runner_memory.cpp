// CudaModelRunner's memory: the activation and step buffers (sized for max_num_batched_tokens and
// max_num_seqs), the profiling step (the largest step run once, so that every lazy allocation of
// cuBLASLt, FlashInfer and the kernels has happened; the per-shape matmul choice and the fused
// batch-1..4 path are tuned there), and the plan of what is left for the KV cache.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend/cuda/cuda_model_runner.h"
#include "engine/backend/cuda/decode_attention.h"
#include "engine/backend/cuda/paged_attention.h"
#include "engine/core/log.h"
#include "engine/core/strings.h"

namespace lathe::cuda {
namespace {

// Device memory kept free for CUDA graph instantiation and driver bookkeeping after the KV cache.
constexpr int64_t kGraphReserveBytes = int64_t{256} << 20;
// Host staging for the variable part of a step (page lists, banned ids, penalty histories); grows.
constexpr int64_t kInitialTailBytes = int64_t{1} << 20;
// Banned ids per sampled row the device buffer reserves room for (EOS and stop ids).
constexpr int64_t kBannedPerRow = 256;
// At most this much device memory for banned ids and penalty histories of one step (64M tokens).
constexpr int64_t kMaxTailBytes = int64_t{256} << 20;

}  // namespace

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
                            decode_attention_splits_for(n, c.num_kv_heads, props_.sm_count,
                                                        decode_split_blocks_per_sm_)));
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
  LATHE_RETURN_IF_ERROR(ahead_sampled_host_.allocate(sampled_bytes, "sampled tokens (host)"));
  LATHE_RETURN_IF_ERROR(ahead_top_host_.allocate(top_bytes, "top logprobs (host)"));
  if (step_done_ == nullptr)
    LATHE_CUDA_TRY(cudaEventCreateWithFlags(&step_done_, cudaEventDisableTiming));
  if (ahead_done_ == nullptr)
    LATHE_CUDA_TRY(cudaEventCreateWithFlags(&ahead_done_, cudaEventDisableTiming));
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
  LATHE_RETURN_IF_ERROR(ahead_step_host_.allocate(step_host_.bytes(), "step inputs (host)"));
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
  std::string attn = "Lathe split-KV";
  if (decode_attention_) {
    attn = "tensor-core GQA (decode_attention";
    if (decode_cluster_splits_ > 0)
      attn += strformat(", splits merged in clusters of <= %d", decode_cluster_splits_);
    attn += ")";
  }
  s += "decode attention " + attn + ", ";
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

}  // namespace lathe::cuda
