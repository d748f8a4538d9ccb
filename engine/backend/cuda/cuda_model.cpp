// CudaModel's creation (weights, activations, attention state) and its step helpers; the forward
// pass is in cuda_forward.cpp.
#include "engine/backend/cuda/cuda_model.h"

#include <algorithm>
#include <chrono>

#include "engine/backend/cuda/decode_attention.h"
#include "engine/backend/cuda/paged_attention.h"
#include "engine/backend/cuda/sampling_rows.h"
#include "engine/backend/cuda/step_upload.h"
#include "engine/core/log.h"
#include "engine/core/strings.h"
#include "engine/model/loaded_model.h"

namespace lathe::cuda {
namespace {

// The largest slab of a stored-format LM head dequantized at once for a batched GEMM.
constexpr int64_t kDequantHeadSlabBytes = int64_t{256} << 20;

// The layer this backend's kernels cover, op for op (cuda_forward.cpp pairs them); a plan that
// differs needs new kernels before it can run here.
Status check_plan(const ForwardPlan& p) {
  ForwardPlan want = p;
  want.layer.clear();
  auto op = [](OpKind k) {
    ForwardOp o;
    o.kind = k;
    return o;
  };
  ForwardOp n = op(OpKind::kNorm), l = op(OpKind::kLinear);
  n.norm = NormSlot::kAttn;
  want.layer.push_back(n);
  l.linear = LinearSlot::kQkv;
  l.bias = p.layer.size() > 1 && p.layer[1].bias;
  want.layer.push_back(l);
  if (p.has(OpKind::kQkNorm)) want.layer.push_back(op(OpKind::kQkNorm));
  for (OpKind k : {OpKind::kRope, OpKind::kKvWrite, OpKind::kAttention})
    want.layer.push_back(op(k));
  l.bias = false;
  l.linear = LinearSlot::kO;
  want.layer.push_back(l);
  want.layer.push_back(op(OpKind::kResidualAdd));
  n.norm = NormSlot::kFfn;
  want.layer.push_back(n);
  l.linear = LinearSlot::kGateUp;
  want.layer.push_back(l);
  want.layer.push_back(op(OpKind::kActivation));
  l.linear = LinearSlot::kDown;
  want.layer.push_back(l);
  want.layer.push_back(op(OpKind::kResidualAdd));
  if (p.world_size != 1)
    return unsupported("the CUDA backend runs world size 1 only (no all-reduce yet)");
  if (p.layer != want.layer)
    return unsupported("the CUDA backend has no kernel sequence for this layer (" + p.describe() +
                       ")");
  return Status();
}

}  // namespace

Result<std::unique_ptr<CudaModel>> CudaModel::create(const LoadedModel& model,
                                                     const CudaModelOptions& options,
                                                     std::shared_ptr<CudaDeviceContext> context) {
  std::unique_ptr<CudaModel> m(new CudaModel());
  m->options_ = options;
  m->ctx_ = std::move(context);
  LATHE_RETURN_IF_ERROR(m->init(model));
  return m;
}

Status CudaModel::init(const LoadedModel& model) {
  config_ = model.config;
  plan_ = make_forward_plan(config_, options_.parallel.world_size);
  LATHE_RETURN_IF_ERROR(check_plan(plan_));
  const CudaSwitches& sw = options_.switches;
  decode_attention_ =
      sw.decode_attention &&
      decode_attention_supports(config_.head_dim, config_.num_heads, config_.num_kv_heads);
  decode_split_tokens_ = sw.decode_split_tokens;
  decode_split_blocks_per_sm_ = sw.decode_split_blocks_per_sm;
  // The decode attention merges its splits in thread-block clusters where the device allows it
  // (decode_attention.h); the switch turns that off (0) or caps the cluster size.
  if (decode_attention_)
    decode_cluster_splits_ = decode_attention_cluster_splits(options_.dtype, config_.head_dim);
  if (sw.decode_cluster >= 0)
    decode_cluster_splits_ = std::min(decode_cluster_splits_, sw.decode_cluster);
  hooks_ = fused_decode_test_hooks();

  const auto t0 = std::chrono::steady_clock::now();
  // The weights must fit in what is free and in this model's share under
  // --gpu-memory-utilization; asked before they are allocated, so the error has the numbers.
  auto check_fits = [&](int64_t bytes) -> Status {
    WeightFit fit;
    fit.model = config_.name.empty() ? std::string("the model") : config_.name;
    fit.device = props().name;
    fit.weight_bytes = bytes;
    LATHE_ASSIGN_OR_RETURN(fit.free_bytes, ctx_->free_bytes());
    fit.total_bytes = props().total_bytes;
    fit.budget_bytes = ctx_->memory_planner().budget(options_.gpu_memory_utilization);
    fit.utilization = options_.gpu_memory_utilization;
    return check_weights_fit(fit);
  };
  LATHE_ASSIGN_OR_RETURN(
      weights_,
      upload_weights(model, options_.dtype, options_.dummy_seed, options_.parallel,
                     sw.native_formats, sw.int4_tiles, sw.gguf_repack, ctx_->stream(), check_fits));
  // FP8 weights: W8A16 in the bandwidth-bound decode products (batch <= 8) and, above, W8A8 on FP8
  // tensor cores where the GPU has them (compute capability 8.9+); said once in words either way,
  // as users of other engines are caught out by a silent downgrade.
  bool has_fp8 = false;
  for (const DeviceLayer& l : weights_.layers)
    for (const DeviceLinear* d : {&l.qkv, &l.o, &l.gate_up, &l.down})
      for (const QuantPart& q : d->parts) has_fp8 |= q.format == WeightFormat::kFp8;
  fp8_tensor_cores_ = sw.fp8_gemm && props().major * 10 + props().minor >= 89;
  if (has_fp8 && fp8_tensor_cores_)
    log_info(strformat(
        "CUDA: FP8 weights on %s: per-tensor-scaled ones W8A8 on FP8 tensor cores from batch %d "
        "(activations quantized with one dynamic scale per product, as vLLM's --quantization fp8); "
        "below that, and per-channel or block-scaled ones at every batch, decoded in the products "
        "(W8A16, activations not quantized)",
        props().name.c_str(), sw.fp8_gemm_min_m));
  else if (has_fp8)
    log_info(strformat(
        "CUDA: FP8 weights run as W8A16 on %s: decoded to %s in the matrix products, activations "
        "not quantized (%s)",
        props().name.c_str(), std::string(dtype_name(options_.dtype)).c_str(),
        sw.fp8_gemm ? "this GPU has no FP8 tensor cores; they start at compute capability 8.9"
                    : "LATHE_CUDA_FP8_GEMM=0"));
  for (DeviceLayer& l : weights_.layers)
    for (DeviceLinear* d : {&l.qkv, &l.o, &l.gate_up, &l.down})
      for (QuantPart& q : d->parts) {
        q.int4_tile_warps = sw.int4_tile_warps;
        q.int4_tiles_max_m = sw.int4_tiles_max_m;
        q.int4_gemm_max_m = sw.int4_gemm_max_m;
        q.int4_tile_pairs = sw.int4_tile_pairs;
        q.int4_norm_max_m = sw.int4_norm_max_m;
        q.int4_stream_max_m = sw.int4_stream_max_m;
        q.int4_stream_stages = sw.int4_stream_stages;
        q.int4_stream_blocks = sw.int4_stream_blocks;
        q.int4_stream_fit = sw.int4_stream_fit;
        q.w8_decode_max_m = sw.w8_decode_max_m;
        q.w8_decode_blocks = sw.w8_decode_blocks;
        q.kquant_norm = sw.kquant_norm;
      }
  if (!sw.quant_rows) {
    for (DeviceLayer& l : weights_.layers)
      for (DeviceLinear* d : {&l.qkv, &l.o, &l.gate_up, &l.down})
        for (QuantPart& q : d->parts) q.one_row_gemv = true;
    for (QuantPart& q : weights_.lm_head.parts) q.one_row_gemv = true;
  }
  log_info(strformat("CUDA: %s of weights on %s in %.1f s",
                     format_bytes(static_cast<double>(weights_.storage.bytes())).c_str(),
                     props().name.c_str(),
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()));

  const std::vector<float> inv = rope_inverse_frequencies(config_);
  LATHE_RETURN_IF_ERROR(
      inv_freq_.allocate(static_cast<int64_t>(inv.size() * sizeof(float)), "RoPE frequencies"));
  LATHE_CUDA_TRY(
      cudaMemcpy(inv_freq_.get(), inv.data(), inv.size() * sizeof(float), cudaMemcpyHostToDevice));
  return Status();
}

Status CudaModel::allocate_activations() {
  const ModelConfig& c = config_;
  const int64_t t = options_.max_tokens, s = options_.max_seqs, h = c.hidden_size, e = 2;
  const int64_t qkv_dim = c.q_size() + 2 * c.kv_size(), ffn = c.intermediate_size, v = c.vocab_size;
  LATHE_RETURN_IF_ERROR(act_.residual.allocate(t * h * 4, "residual stream"));
  LATHE_RETURN_IF_ERROR(act_.xnorm.allocate(t * h * e, "normalized activations"));
  LATHE_RETURN_IF_ERROR(act_.qkv.allocate(t * qkv_dim * e, "QKV activations"));
  LATHE_RETURN_IF_ERROR(act_.attn_out.allocate(t * c.q_size() * e, "attention output"));
  LATHE_RETURN_IF_ERROR(act_.proj_out.allocate(t * h * e, "projection output"));
  LATHE_RETURN_IF_ERROR(act_.gate_up.allocate(t * 2 * ffn * e, "gate/up activations"));
  LATHE_RETURN_IF_ERROR(act_.act.allocate(t * ffn * e, "MLP activations"));
  LATHE_RETURN_IF_ERROR(
      act_.logits.allocate(std::max<int64_t>(s, options_.max_logit_rows) * v * 4, "logits"));
  const int sm = props().sm_count;
  const int bps =
      decode_split_blocks_per_sm_ > 0 ? decode_split_blocks_per_sm_ : kDecodeAttentionBlocksPerSm;
  int64_t ws = 0;
  for (int64_t n = 1; n <= std::min<int64_t>(t, 8 * sm); ++n)
    ws = std::max(
        ws, paged_attention_workspace_bytes(n, c.num_heads, c.head_dim,
                                            paged_attention_splits_for(n, c.num_kv_heads, sm)));
  if (decode_attention_)
    for (int64_t n = 1; n <= s; ++n)
      ws = std::max(ws, decode_attention_workspace_bytes(
                            n, c.num_heads, c.head_dim,
                            decode_attention_splits_for(n, c.num_kv_heads, sm, bps)));
  LATHE_RETURN_IF_ERROR(
      act_.attn_ws.allocate(std::max<int64_t>(ws, 16), "attention split-KV workspace"));
  // Arrival counters of the decode kernel's split merge: zero, and left zero by every launch.
  LATHE_RETURN_IF_ERROR(act_.attn_counters.allocate(std::max<int64_t>(s * c.num_kv_heads * 4, 16),
                                                    "attention counters"));
  LATHE_CUDA_TRY(cudaMemsetAsync(act_.attn_counters.get(), 0,
                                 static_cast<size_t>(act_.attn_counters.bytes()), ctx_->stream()));
  linear_ = std::make_unique<LinearDispatcher>(&ctx_->gemm(), options_.dtype,
                                               options_.switches.gemv_epilogues);
  linear_->set_fp8_gemm(fp8_tensor_cores_, options_.switches.fp8_gemm_min_m,
                        options_.switches.fp8_decode_max_k);
  // Stored-format projections at batches above quant_gemv's: dequantized into this workspace, a
  // layer projection whole, the LM head in slabs of at most kDequantHeadSlabBytes.
  int64_t dq = 0;
  for (int64_t li = 0; li < c.num_layers; ++li)
    for (LinearSlot slot :
         {LinearSlot::kQkv, LinearSlot::kO, LinearSlot::kGateUp, LinearSlot::kDown}) {
      const DeviceLinear& w = weights_.linear(li, slot);
      if (!w.parts.empty()) dq = std::max(dq, w.n * w.k * e);
    }
  if (!weights_.lm_head.parts.empty())
    dq = std::max(dq, std::min(weights_.lm_head.n * weights_.lm_head.k * e, kDequantHeadSlabBytes));
  if (dq > 0) {
    LATHE_RETURN_IF_ERROR(act_.dequant_ws.allocate(dq, "dequantization workspace"));
    linear_->set_dequant_workspace(act_.dequant_ws.get(), dq);
  }
  return create_prefill_attention();
}

Status CudaModel::create_prefill_attention() {
  prefill_.reset();
  const bool window_active =
      config_.sliding_window > 0 && options_.max_model_len > config_.sliding_window;
  const int32_t window = window_active ? static_cast<int32_t>(config_.sliding_window) : 0;
  if (options_.switches.own_prefill_attention ||
      !PrefillAttention::supports(options_.dtype, config_.head_dim, window))
    return Status();
  auto p = PrefillAttention::create(options_.dtype, static_cast<int32_t>(config_.num_heads),
                                    static_cast<int32_t>(config_.num_kv_heads),
                                    static_cast<int32_t>(config_.head_dim), options_.block_size,
                                    options_.max_tokens, options_.max_seqs);
  if (p.is_ok()) {
    prefill_ = std::move(p).value();
  } else if (p.status().code() != ErrorCode::kUnsupported) {
    return p.status();
  }
  return Status();
}

Status CudaModel::set_block_size(int32_t block_size) {
  if (block_size == options_.block_size) return Status();
  options_.block_size = block_size;
  return prefill_ ? create_prefill_attention() : Status();  // FlashInfer plans in pages
}

KvLayout CudaModel::kv_layout(int32_t num_blocks, int32_t block_size) const {
  KvLayout l;
  l.dtype = options_.dtype;
  l.num_layers = static_cast<int32_t>(config_.num_layers);
  l.num_kv_heads = static_cast<int32_t>(config_.num_kv_heads);
  l.head_dim = static_cast<int32_t>(config_.head_dim);
  l.block_size = block_size;
  l.num_blocks = num_blocks;
  return l;
}

AttnPath CudaModel::path_for(bool decode) const {
  return decode ? AttnPath::kDecode : (prefill_ ? AttnPath::kFlashInfer : AttnPath::kOwn);
}

int32_t CudaModel::splits_for(AttnPath path, int32_t num_tokens) const {
  return path == AttnPath::kFlashInfer
             ? 1
             : paged_attention_splits_for(num_tokens, config_.num_kv_heads, props().sm_count);
}

Status CudaModel::plan_prefill(const StepArrays& host, int32_t num_seqs) const {
  return prefill_->plan(host.query_start, host.kv_indptr, num_seqs, ctx_->stream());
}

Status CudaModel::run_eager(const ModelInput& in, const StepLimits& limits, PinnedBuffer& host,
                            DeviceBuffer& dev, PackedStep* packed, const CudaKvCache& kv,
                            StepProfiler* prof) const {
  LATHE_RETURN_IF_ERROR(upload_step(in, limits, 0, false, host, dev, packed, ctx_->stream()));
  ForwardStep s;
  s.d = StepArrays::at(dev.get(), packed->layout);
  s.num_tokens = packed->num_tokens;
  s.num_seqs = packed->num_seqs;
  s.num_lm_rows = packed->num_lm_rows;
  s.path = path_for(in.num_tokens() == in.num_seqs());
  if (s.path == AttnPath::kFlashInfer)
    LATHE_RETURN_IF_ERROR(plan_prefill(StepArrays::at(host.get(), packed->layout), s.num_seqs));
  s.splits = splits_for(s.path, in.num_tokens());
  return forward(s, kv, prof);
}

bool CudaModel::fused_decode_supported(std::string* why) const {
  // decode_gemv reads dense weights of the activation dtype.
  for (int64_t li = 0; li < config_.num_layers; ++li)
    for (LinearSlot slot :
         {LinearSlot::kQkv, LinearSlot::kO, LinearSlot::kGateUp, LinearSlot::kDown}) {
      const DeviceLinear& w = weights_.linear(li, slot);
      if (w.format != WeightFormat::kDense || w.dtype != options_.dtype) {
        if (why != nullptr)
          *why = w.name + " is " + std::string(weight_format_name(w.format)) +
                 ": the fused batch-1..4 kernels read dense weights only";
        return false;
      }
    }
  return true;
}

}  // namespace lathe::cuda
