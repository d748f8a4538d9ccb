// CudaModel's forward pass: the embedding, each layer's plan ops walked in order (fused at batch
// 1..4 where the load-time choice says so, decode_gemv.h; otherwise each op or pair of ops one
// kernel, cuda_model.h lists the pairings), the head (final norm, LM head), and attention by path.
// The pieces are separate so that the fused path's check (fused_decode_check.cpp) runs exactly the
// code that serves, one layer at a time.
#include <cmath>

#include "engine/backend/cuda/add_rms_norm.h"
#include "engine/backend/cuda/cuda_model.h"
#include "engine/backend/cuda/decode_attention.h"
#include "engine/backend/cuda/embedding.h"
#include "engine/backend/cuda/gemv.h"
#include "engine/backend/cuda/paged_attention.h"
#include "engine/backend/cuda/qkv_rope_kv.h"
#include "engine/backend/cuda/swiglu.h"

namespace lathe::cuda {
namespace {

Status mark(StepProfiler* prof, Phase p) {
  return prof != nullptr ? prof->mark(p) : Status();
}

bool is_op(const std::vector<ForwardOp>& ops, size_t i, OpKind kind) {
  return i < ops.size() && ops[i].kind == kind;
}

}  // namespace

Status CudaModel::attention(const ForwardStep& s, const KvLayerView& kv, int64_t li) const {
  (void)li;
  const ModelConfig& c = config_;
  const int64_t hq = c.num_heads, hkv = c.num_kv_heads, hd = c.head_dim;
  const int64_t qkv_dim = (hq + 2 * hkv) * hd;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  const StepArrays& d = s.d;
  // The fields the three kernels' arguments share, and those of the two Lathe kernels.
  auto common = [&](auto& x) {
    x.q = act_.qkv.get();
    x.q_stride = qkv_dim;
    x.out = act_.attn_out.get();
    x.k_cache = kv.k;
    x.v_cache = kv.v;
    x.kv_indptr = d.kv_indptr;
    x.kv_indices = d.kv_indices;
    x.scale = scale;
  };
  auto lathe_kernel = [&](auto& x) {
    common(x);
    x.seq_lens = d.seq_lens;
    x.num_seqs = s.num_seqs;
    x.num_heads = static_cast<int32_t>(hq);
    x.num_kv_heads = static_cast<int32_t>(hkv);
    x.head_dim = static_cast<int32_t>(hd);
    x.block_size = kv.block_size;
    x.sliding_window = plan_.sliding_window;
    x.workspace = act_.attn_ws.as<float>();
    x.dtype = options_.dtype;
    x.kv_dtype = kv.dtype;
  };
  if (s.path == AttnPath::kFlashInfer) {
    LATHE_RETURN_IF_ERROR(check_kv_dtype("FlashInfer prefill attention", options_.dtype, kv.dtype));
    PrefillRunArgs pa;
    common(pa);
    pa.qo_indptr = d.query_start;
    pa.kv_last_page_len = d.kv_last_page_len;
    return prefill_->run(pa, ctx_->stream());
  }
  if (s.path == AttnPath::kDecode && decode_attention_) {
    DecodeAttentionArgs da;
    lathe_kernel(da);
    const int bps =
        decode_split_blocks_per_sm_ > 0 ? decode_split_blocks_per_sm_ : kDecodeAttentionBlocksPerSm;
    const DecodeSplitPlan split =
        decode_attention_split_plan(s.num_seqs, hkv, props().sm_count, decode_cluster_splits_, bps);
    da.max_splits = split.max_splits;
    da.cluster_merge = split.cluster_merge;
    da.min_split_tokens = decode_split_tokens_ > 0 ? decode_split_tokens_ : split.min_split_tokens;
    da.counters = act_.attn_counters.as<int32_t>();
    return decode_attention(da, ctx_->stream());
  }
  PagedAttentionArgs pa;
  lathe_kernel(pa);
  pa.query_start = d.query_start;
  pa.num_tokens = s.num_tokens;
  pa.max_splits = s.splits;
  return paged_attention(pa, ctx_->stream());
}

const FusedDecodeChoice* CudaModel::fused_for(int32_t t) const {
  return t >= 1 && t <= kDecodeGemvMaxM && fused_[static_cast<size_t>(t)].use
             ? &fused_[static_cast<size_t>(t)]
             : nullptr;
}

Status CudaModel::forward(const ForwardStep& s, const CudaKvCache& kv, StepProfiler* prof) const {
  return forward_with(s, kv, fused_for(s.num_tokens), prof);
}

Status CudaModel::forward_with(const ForwardStep& s, const CudaKvCache& kv,
                               const FusedDecodeChoice* fused, StepProfiler* prof) const {
  LATHE_RETURN_IF_ERROR(embed(s, prof));
  // A fused (or 4-bit tiled) down projection completes the residual stream in its epilogue; an
  // unfused one leaves its output in proj_out for the next norm to add.
  const bool down_fused = fused != nullptr && fused->parts.down;
  bool pending = false;
  for (int64_t li = 0; li < config_.num_layers; ++li)
    LATHE_RETURN_IF_ERROR(layer(s, kv, li, fused, &pending, prof));
  if (s.num_lm_rows == 0) return Status();
  return final_logits(s, down_fused && fused->lm_head ? fused : nullptr, pending, prof);
}

Status CudaModel::embed(const ForwardStep& s, StepProfiler* prof) const {
  LATHE_RETURN_IF_ERROR(embedding(options_.dtype, weights_.token_embd, config_.vocab_size,
                                  config_.hidden_size, s.d.token_ids, s.num_tokens,
                                  act_.residual.as<float>(), ctx_->stream()));
  return mark(prof, Phase::kEmbedding);
}

AddRmsNormArgs CudaModel::norm_args(const float* weight, bool add_pending, int32_t rows) const {
  AddRmsNormArgs a;
  a.residual = act_.residual.as<float>();
  a.x = add_pending ? act_.proj_out.get() : nullptr;
  a.weight = weight;
  a.out = act_.xnorm.get();
  a.rows = rows;
  a.dim = config_.hidden_size;
  a.eps = plan_.rms_norm_eps;
  a.dtype = options_.dtype;
  return a;
}

DecodeGemvArgs CudaModel::decode_gemv_args(int32_t m, float eps) const {
  DecodeGemvArgs g;
  g.dtype = options_.dtype;
  g.m = m;
  g.eps = eps;
  g.residual = act_.residual.as<float>();
  g.out_dtype = options_.dtype;
  return g;
}

QkvRopeKvArgs CudaModel::qkv_rope_kv_args(const DeviceLayer& L, RopeStyle style, void* qkv,
                                          int32_t tokens, const int32_t* positions,
                                          const int64_t* slots, const KvLayerView& kv) const {
  QkvRopeKvArgs rk;
  rk.qkv = qkv;
  rk.num_tokens = tokens;
  rk.num_heads = config_.num_heads;
  rk.num_kv_heads = config_.num_kv_heads;
  rk.head_dim = config_.head_dim;
  rk.positions = positions;
  rk.inv_freq = inv_freq_.as<float>();
  rk.style = style;
  rk.q_bias = L.q_bias, rk.k_bias = L.k_bias, rk.v_bias = L.v_bias;
  rk.q_norm = plan_.has(OpKind::kQkNorm) ? L.q_norm : nullptr;
  rk.k_norm = plan_.has(OpKind::kQkNorm) ? L.k_norm : nullptr;
  rk.eps = plan_.rms_norm_eps;
  rk.k_cache = kv.k, rk.v_cache = kv.v;
  rk.slot_mapping = slots;
  rk.dtype = options_.dtype;
  rk.kv_dtype = kv.dtype;
  return rk;
}

GemvRopeKv CudaModel::rope_kv_epilogue(const QkvRopeKvArgs& rk) {
  GemvRopeKv rp;
  rp.num_heads = static_cast<int32_t>(rk.num_heads);
  rp.num_kv_heads = static_cast<int32_t>(rk.num_kv_heads);
  rp.head_dim = static_cast<int32_t>(rk.head_dim);
  rp.positions = rk.positions;
  rp.inv_freq = rk.inv_freq;
  rp.style = rk.style;
  rp.q_bias = rk.q_bias, rp.k_bias = rk.k_bias, rp.v_bias = rk.v_bias;
  rp.k_cache = rk.k_cache, rp.v_cache = rk.v_cache;
  rp.slot_mapping = rk.slot_mapping;
  rp.kv_dtype = rk.kv_dtype;
  return rp;
}

Status CudaModel::layer(const ForwardStep& s, const CudaKvCache& kv, int64_t li,
                        const FusedDecodeChoice* fused, bool* pending_io,
                        StepProfiler* prof) const {
  bool& pending = *pending_io;
  const DType dt = options_.dtype;
  const int32_t t = s.num_tokens;
  const DeviceLayer& L = weights_.layers[static_cast<size_t>(li)];
  const FusedParts fp = fused != nullptr ? fused->parts : FusedParts{};
  if (!fp.valid() || (fp.qkv && pending))
    return internal_error("fused decode parts " + fp.name() + " cannot run here (" +
                          (pending ? "the previous down projection is pending" : "invalid set") +
                          ")");
  const KvLayerView kvl = kv.layer(li);
  cudaStream_t stream = ctx_->stream();
  // A fused layer broken on purpose (test hooks, fused_decode_check.h).
  RopeStyle rope_style = plan_.rope_style;
  float prologue_eps = plan_.rms_norm_eps;
  if (fused != nullptr && hooks_.fault == FusedDecodeFault::kRopeStyle)
    rope_style = rope_style == RopeStyle::kNeox ? RopeStyle::kInterleaved : RopeStyle::kNeox;
  if (fused != nullptr && hooks_.fault == FusedDecodeFault::kNormEps) prologue_eps = 1e-2f;
  // The fused batch-1..4 parts (decode_gemv.h): the residual stream is updated by the o/down
  // epilogues, the norms run in the QKV and gate/up prologues, SwiGLU in the gate/up epilogue.
  DecodeGemvArgs g = decode_gemv_args(t, prologue_eps);
  const std::vector<ForwardOp>& ops = plan_.layer;
  const float* norm_weight = nullptr;  // the norm awaiting its projection (kNorm seen)
  // The norm's kernel left to its projection: 4-bit tiled projections at small batch build the
  // normalized input themselves (quant_gemv_tile_pairs), when no projection is pending.
  bool norm_deferred = false;
  const TileNormInput norm_in{act_.residual.as<float>(), nullptr, plan_.rms_norm_eps};
  // A deferred norm whose projection cannot take it after all: its own kernel, now.
  auto norm_now = [&]() -> Status {
    if (!norm_deferred) return Status();
    norm_deferred = false;
    LATHE_RETURN_IF_ERROR(add_rms_norm(norm_args(norm_weight, false, t), stream));
    return mark(prof, Phase::kNorm);
  };

  for (size_t i = 0; i < ops.size(); ++i) {
    const ForwardOp& op = ops[i];
    switch (op.kind) {
      case OpKind::kNorm: {
        norm_weight = op.norm == NormSlot::kAttn ? L.attn_norm : L.ffn_norm;
        const LinearSlot next = i + 1 < ops.size() ? ops[i + 1].linear : LinearSlot::kQkv;
        const bool in_prologue =
            is_op(ops, i + 1, OpKind::kLinear) &&
            ((next == LinearSlot::kQkv && fp.qkv) || (next == LinearSlot::kGateUp && fp.gate_up));
        if (in_prologue) break;  // the fused projection normalizes in its prologue
        if (!pending && is_op(ops, i + 1, OpKind::kLinear) &&
            (next == LinearSlot::kQkv || next == LinearSlot::kGateUp) &&
            linear_->takes_norm_input(
                weights_.linear(li, next), t,
                next == LinearSlot::kGateUp ? GemvOutput::kSwiglu : GemvOutput::kStore)) {
          norm_deferred = true;  // decided again by the projection (norm_now)
          break;
        }
        LATHE_RETURN_IF_ERROR(add_rms_norm(norm_args(norm_weight, pending, t), stream));
        pending = false;
        LATHE_RETURN_IF_ERROR(mark(prof, Phase::kNorm));
        break;
      }
      case OpKind::kLinear: {
        const DeviceLinear& w = weights_.linear(li, op.linear);
        if (op.linear == LinearSlot::kQkv) {
          // The attention input: the projection, then (QK norm,) RoPE and the KV write.
          const bool qk_norm = is_op(ops, i + 1, OpKind::kQkNorm);
          const size_t last = i + (qk_norm ? 3 : 2);
          if (!is_op(ops, last - 1, OpKind::kRope) || !is_op(ops, last, OpKind::kKvWrite))
            return unsupported("the CUDA backend runs linear(qkv) followed by rope and kv_write");
          i = last;
          const QkvRopeKvArgs rk = qkv_rope_kv_args(L, rope_style, act_.qkv.get(), t, s.d.positions,
                                                    s.d.slot_mapping, kvl);
          const GemvRopeKv rp = rope_kv_epilogue(rk);
          const bool rope_fused = fp.qkv && fused->rope && !qk_norm;
          // A kernel may take the epilogue with the RMSNorm input only (8-bit parts).
          const bool rope_epilogue =
              !fp.qkv && !qk_norm &&
              ((norm_deferred && linear_->takes_norm_input(w, t, GemvOutput::kRopeKv, &rp)) ||
               linear_->takes_epilogue(w, t, GemvOutput::kRopeKv, &rp));
          if (fp.qkv) {
            g.w = w.w, g.n = w.n, g.k = w.k;
            g.input = GemvInput::kRmsNorm, g.norm_weight = norm_weight, g.row_index = nullptr;
            g.output = rope_fused ? GemvOutput::kRopeKv : GemvOutput::kStore, g.y = act_.qkv.get();
            if (rope_fused) g.rope = rp;
            g.blocks_per_sm = fused->blocks_per_sm[0];
            LATHE_RETURN_IF_ERROR(decode_gemv(g, stream));
          } else {
            const GemvOutput out = rope_epilogue ? GemvOutput::kRopeKv : GemvOutput::kStore;
            TileNormInput ni = norm_in;
            ni.weight = norm_weight;
            const bool take_norm = norm_deferred && linear_->takes_norm_input(w, t, out, &rp);
            if (!take_norm) LATHE_RETURN_IF_ERROR(norm_now());
            norm_deferred = false;
            LATHE_RETURN_IF_ERROR(linear_->run(w, dt, act_.xnorm.get(), act_.qkv.get(), t, stream,
                                               out, rp, take_norm ? &ni : nullptr));
          }
          LATHE_RETURN_IF_ERROR(mark(prof, Phase::kQkvGemm));
          if (!rope_fused && !rope_epilogue) {
            LATHE_RETURN_IF_ERROR(qkv_rope_kv(rk, stream));
            LATHE_RETURN_IF_ERROR(mark(prof, Phase::kRopeKv));
          }
        } else if (op.linear == LinearSlot::kGateUp) {
          // The MLP input: the projection, then the activation.
          if (!is_op(ops, i + 1, OpKind::kActivation))
            return unsupported("the CUDA backend runs linear(gate_up) followed by its activation");
          ++i;
          if (fp.gate_up) {
            g.w = w.w, g.n = w.n, g.k = w.k;
            g.input = GemvInput::kRmsNorm, g.norm_weight = norm_weight;
            g.output = GemvOutput::kSwiglu, g.y = act_.act.get();
            g.blocks_per_sm = fused->blocks_per_sm[2];
            LATHE_RETURN_IF_ERROR(decode_gemv(g, stream));
            LATHE_RETURN_IF_ERROR(mark(prof, Phase::kGateUpGemm));
          } else if (const bool take_norm =
                         norm_deferred && linear_->takes_norm_input(w, t, GemvOutput::kSwiglu);
                     take_norm || linear_->takes_epilogue(w, t, GemvOutput::kSwiglu)) {
            TileNormInput ni = norm_in;
            ni.weight = norm_weight;
            if (!take_norm) LATHE_RETURN_IF_ERROR(norm_now());
            norm_deferred = false;
            LATHE_RETURN_IF_ERROR(linear_->run(w, dt, act_.xnorm.get(), act_.act.get(), t, stream,
                                               GemvOutput::kSwiglu, {}, take_norm ? &ni : nullptr));
            LATHE_RETURN_IF_ERROR(mark(prof, Phase::kGateUpGemm));
          } else {
            LATHE_RETURN_IF_ERROR(norm_now());
            LATHE_RETURN_IF_ERROR(
                linear_->run(w, dt, act_.xnorm.get(), act_.gate_up.get(), t, stream));
            LATHE_RETURN_IF_ERROR(mark(prof, Phase::kGateUpGemm));
            LATHE_RETURN_IF_ERROR(swiglu(dt, act_.gate_up.get(), act_.act.get(), t,
                                         config_.intermediate_size, stream));
            LATHE_RETURN_IF_ERROR(mark(prof, Phase::kSwiglu));
          }
        } else {
          // o and down: the product goes to the residual stream (the residual_add that follows),
          // in the fused epilogue or left pending for the next norm.
          const bool is_o = op.linear == LinearSlot::kO;
          if (!is_op(ops, i + 1, OpKind::kResidualAdd))
            return unsupported("the CUDA backend runs linear(o|down) followed by residual_add");
          ++i;
          if (ops[i].reduce)
            return unsupported("the CUDA backend has no all-reduce (tensor parallelism) yet");
          const bool part = is_o ? fp.o : fp.down;
          const void* x = is_o ? act_.attn_out.get() : act_.act.get();
          if (part) {
            g.w = w.w, g.n = w.n, g.k = w.k;
            g.input = GemvInput::kPlain, g.x = x;
            g.output = GemvOutput::kResidualAdd, g.residual_out = act_.residual.as<float>();
            g.blocks_per_sm = fused->blocks_per_sm[is_o ? 1 : 3];
            LATHE_RETURN_IF_ERROR(decode_gemv(g, stream));
          } else if (!pending && linear_->takes_epilogue(w, t, GemvOutput::kResidualAdd)) {
            // 4-bit tiles: the rounded product added to the residual in the kernel.
            LATHE_RETURN_IF_ERROR(linear_->run(w, dt, x, act_.residual.as<float>(), t, stream,
                                               GemvOutput::kResidualAdd));
          } else {
            LATHE_RETURN_IF_ERROR(linear_->run(w, dt, x, act_.proj_out.get(), t, stream));
            pending = true;
          }
          LATHE_RETURN_IF_ERROR(mark(prof, is_o ? Phase::kOGemm : Phase::kDownGemm));
        }
        break;
      }
      case OpKind::kAttention:
        LATHE_RETURN_IF_ERROR(attention(s, kvl, li));
        LATHE_RETURN_IF_ERROR(mark(prof, Phase::kAttention));
        break;
      case OpKind::kQkNorm:
      case OpKind::kRope:
      case OpKind::kKvWrite:
      case OpKind::kActivation:
      case OpKind::kResidualAdd:
      case OpKind::kGatherVocab:
        return unsupported("the CUDA backend has no kernel for a lone " + op.name() +
                           " in a layer (" + plan_.describe() + ")");
    }
  }
  if (norm_deferred) return internal_error("a deferred RMSNorm had no projection to take it");
  return Status();
}

Status CudaModel::final_logits(const ForwardStep& s, const FusedDecodeChoice* fused_lm,
                               bool pending, StepProfiler* prof) const {
  const ModelConfig& c = config_;
  const int32_t r = s.num_lm_rows;
  for (const ForwardOp& op : plan_.head)
    if (op.kind == OpKind::kGatherVocab && op.reduce)
      return unsupported("the CUDA backend has no vocabulary gather (tensor parallelism) yet");
  if (fused_lm != nullptr) {
    DecodeGemvArgs g = decode_gemv_args(r, plan_.rms_norm_eps);
    g.w = weights_.lm_head.w, g.n = c.vocab_size, g.k = c.hidden_size;
    g.input = GemvInput::kRmsNorm, g.norm_weight = weights_.output_norm, g.row_index = s.d.lm_rows;
    g.output = GemvOutput::kStore, g.y = act_.logits.get(), g.out_dtype = DType::kF32;
    g.blocks_per_sm = fused_lm->blocks_per_sm[4];
    LATHE_RETURN_IF_ERROR(decode_gemv(g, ctx_->stream()));
    return mark(prof, Phase::kLmHead);
  }
  AddRmsNormArgs fin = norm_args(weights_.output_norm, pending, r);
  fin.row_index = s.d.lm_rows;
  LATHE_RETURN_IF_ERROR(add_rms_norm(fin, ctx_->stream()));
  LATHE_RETURN_IF_ERROR(mark(prof, Phase::kNorm));
  LATHE_RETURN_IF_ERROR(linear_->run(weights_.lm_head, DType::kF32, act_.xnorm.get(),
                                     act_.logits.get(), r, ctx_->stream()));
  return mark(prof, Phase::kLmHead);
}

}  // namespace lathe::cuda
