// CudaModelRunner's load-time measurements: the profiling step (the largest step run once, so that
// every lazy allocation of cuBLASLt, FlashInfer and the kernels has happened; the per-shape matmul
// choice and the fused batch-1..4 path are tuned there), and the plan of what is left for the KV
// cache, from the device's memory planner.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend/cuda/cuda_model_runner.h"
#include "engine/backend/cuda/fused_decode_tuner.h"
#include "engine/core/log.h"
#include "engine/core/strings.h"

namespace lathe::cuda {
namespace {

// Device memory kept free for CUDA graph instantiation and driver bookkeeping after the KV cache.
constexpr int64_t kGraphReserveBytes = int64_t{256} << 20;

}  // namespace

Status CudaModelRunner::profile_step() {
  const ModelConfig& c = model_->config();
  const int32_t max_tokens = model_->options().max_tokens, max_seqs = model_->options().max_seqs;
  // A one-block cache: every page of the profiling steps is block 0 and no token writes K/V (slot
  // -1), which exercises every kernel at full size without a real cache.
  LATHE_RETURN_IF_ERROR(
      kv_.allocate(model_->kv_layout(1, block_size_), "profiling KV block", ctx_->stream()));
  LATHE_RETURN_IF_ERROR(executor_->on_kv_changed(false));

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
            (static_cast<int64_t>(in.token_ids.size()) * 7919 + 1) % c.vocab_size));
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
  const int32_t first = std::min(max_tokens - (max_seqs - 1), max_model_len_);
  LATHE_RETURN_IF_ERROR(executor_->execute(make_step(max_seqs, std::max(1, first))).status());
  // A decode step of max_seqs sequences (the decode kernel and the sampler at full width).
  LATHE_RETURN_IF_ERROR(executor_->execute(make_step(max_seqs, 1)).status());
  const int32_t k = options_.num_speculative_tokens;
  if (k > 0) {
    // A step verifying k drafts per sequence: the sampler at its widest (every row sampled).
    const int32_t seqs = std::max(1, std::min(max_seqs, max_tokens / (1 + k)));
    ModelInput in;
    in.query_start.push_back(0);
    in.max_blocks_per_seq = static_cast<int32_t>(ceil_div(1 + k, block_size_));
    for (int32_t s = 0; s < seqs; ++s) {
      for (int32_t p = 0; p <= k; ++p) {
        in.token_ids.push_back(static_cast<int32_t>((s * 31 + p) % c.vocab_size));
        in.positions.push_back(p);
        in.slot_mapping.push_back(-1);
      }
      in.query_start.push_back(static_cast<int32_t>(in.token_ids.size()));
      in.seq_lens.push_back(1 + k);
      in.sample_seqs.push_back(s);
      in.sample_counts.push_back(1 + k);
      for (int32_t p = 0; p <= k; ++p) {
        SamplingRow row;
        row.temperature = 0.8f;
        row.seed = static_cast<uint64_t>(s);
        row.step = static_cast<uint64_t>(p);
        in.sampling.push_back(row);
      }
    }
    in.block_tables.assign(static_cast<size_t>(seqs) * in.max_blocks_per_seq, 0);
    in.max_seq_len = 1 + k;
    in.max_query_len = 1 + k;
    LATHE_RETURN_IF_ERROR(executor_->execute(in).status());
  }
  LATHE_RETURN_IF_ERROR(tune());
  kv_.reset();
  return executor_->on_kv_changed(false);
}

Status CudaModelRunner::tune() {
  // gemv or cuBLASLt for each small batch size, timed on the real weights.
  const DeviceWeights& w = model_->weights();
  const DType dt = model_->options().dtype;
  std::vector<std::pair<DeviceLinear, DType>> shapes;
  for (LinearSlot slot : {LinearSlot::kQkv, LinearSlot::kO, LinearSlot::kGateUp, LinearSlot::kDown})
    shapes.emplace_back(w.linear(0, slot), dt);
  shapes.emplace_back(w.lm_head, DType::kF32);
  int64_t max_k = 0, max_n = 0;
  for (const auto& [l, out] : shapes) max_k = std::max(max_k, l.k), max_n = std::max(max_n, l.n);
  DeviceBuffer x, y;
  LATHE_RETURN_IF_ERROR(x.allocate(kGemvMaxM * max_k * 2, "linear autotune input"));
  LATHE_RETURN_IF_ERROR(y.allocate(kGemvMaxM * max_n * 4, "linear autotune output"));
  LATHE_RETURN_IF_ERROR(model_->linear().autotune(shapes, x.get(), y.get(), ctx_->stream()));
  FusedDecodeTuner tuner(*model_, executor_->limits(), kv_, options_.enforce_eager);
  const Status tuned = tuner.run(x.get(), y.get());
  fused_report_ = tuner.report();
  if (!tuned.is_ok()) {
    // The fused batch-1..4 path is optional: without it the unfused path serves every step.
    if (options_.switches.fused == FusedDecodeMode::kForce) return tuned;
    log_warning("CUDA: the fused batch-1..4 decode path is off: " + tuned.message());
    cudaGetLastError();
    model_->set_fused_choices({});
    fused_report_.clear();
  }
  LATHE_CUDA_TRY(cudaStreamSynchronize(ctx_->stream()));
  return Status();
}

Status CudaModelRunner::plan_memory() {
  MemoryPlanner& planner = ctx_->memory_planner();
  LATHE_ASSIGN_OR_RETURN(const int64_t free_now, ctx_->free_bytes());
  const int64_t total = planner.total();
  const int64_t footprint = std::max<int64_t>(0, free_before_load_ - free_now);
  const int64_t weight_bytes = model_->weight_bytes();
  memory_.device_name = strformat("%s (%s)", ctx_->props().name.c_str(),
                                  format_bytes(static_cast<double>(total)).c_str());
  memory_.total_bytes = total;
  memory_.weight_bytes = weight_bytes;
  memory_.activation_bytes = std::max<int64_t>(0, footprint - weight_bytes);
  load_reservation_ =
      MemoryReservation(&planner, "weights and activations of " + model_->config().name, footprint);
  // What the planner leaves under --gpu-memory-utilization (other models on the device included),
  // never more than is free now.
  const int64_t reserve = options_.enforce_eager ? 0 : kGraphReserveBytes;
  const int64_t budget =
      std::min(planner.budget(options_.gpu_memory_utilization), free_now) - reserve;
  memory_.kv_budget_bytes = std::max<int64_t>(0, budget);
  return check_one_sequence_fits(memory_.kv_budget_bytes);
}

Status CudaModelRunner::check_one_sequence_fits(int64_t kv_budget) const {
  const int64_t per_token = model_->kv_layout(1, 1).block_bytes();
  const int64_t one_seq = ceil_div(max_model_len_, block_size_) * kv_block_bytes(block_size_);
  if (one_seq <= kv_budget) return Status();
  const int64_t fits = std::max<int64_t>(0, kv_budget) / per_token / block_size_ * block_size_;
  const std::string head = strformat(
      "max-model-len %d needs %s of KV cache for one sequence; %s are free after weights (%s) and "
      "activations (%s) "
      "under --gpu-memory-utilization %.2f of %s",
      max_model_len_, format_bytes(static_cast<double>(one_seq)).c_str(),
      format_bytes(static_cast<double>(std::max<int64_t>(0, kv_budget))).c_str(),
      format_bytes(static_cast<double>(model_->weight_bytes())).c_str(),
      format_bytes(static_cast<double>(memory_.activation_bytes)).c_str(),
      options_.gpu_memory_utilization,
      format_bytes(static_cast<double>(ctx_->props().total_bytes)).c_str());
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
                model_->has_flashinfer() ? "FlashInfer FA2" : "Lathe split-KV");
  std::string attn = "Lathe split-KV";
  if (model_->uses_decode_attention()) {
    attn = "tensor-core GQA (decode_attention";
    if (model_->decode_cluster_splits() > 0)
      attn += strformat(", splits merged in clusters of <= %d", model_->decode_cluster_splits());
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
    s += strformat("CUDA graphs for decode batches up to %d", model_->options().max_seqs);
  }
  const std::string sw = options_.switches.describe();
  if (sw != "defaults") s += ", switches " + sw;
  return s;
}

}  // namespace lathe::cuda
