// CudaModelRunner's forward pass (the op sequence in cuda_model_runner.h): the embedding, each
// layer fused (batch 1..4, decode_gemv.h) or unfused, the final norm and the LM head, and the
// attention of a layer by path (FlashInfer prefill, tensor-core decode, Lathe's split-KV kernel).
// The pieces are separate so that the fused path's check (fused_decode_check.cpp) runs exactly
// the code that serves, one layer at a time.
#include <cmath>

#include "engine/backend/cuda/add_rms_norm.h"
#include "engine/backend/cuda/cuda_model_runner.h"
#include "engine/backend/cuda/decode_attention.h"
#include "engine/backend/cuda/embedding.h"
#include "engine/backend/cuda/gemv.h"
#include "engine/backend/cuda/paged_attention.h"
#include "engine/backend/cuda/qkv_rope_kv.h"
#include "engine/backend/cuda/swiglu.h"

namespace lathe::cuda {

Status CudaModelRunner::attention(const StepArrays& d, int64_t li, int32_t t, int32_t s,
                                  AttnPath path, int32_t splits) {
  const ModelConfig& c = config_;
  const int64_t hq = c.num_heads, hkv = c.num_kv_heads, hd = c.head_dim;
  const int64_t qkv_dim = (hq + 2 * hkv) * hd;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  uint8_t* k_cache = kv_.as<uint8_t>() + 2 * li * kv_layer_elems_ * 2;
  uint8_t* v_cache = k_cache + kv_layer_elems_ * 2;
  // The fields the three kernels' arguments share, and those of the two Lathe kernels.
  auto common = [&](auto& x) {
    x.q = qkv_.get();
    x.q_stride = qkv_dim;
    x.out = attn_out_.get();
    x.k_cache = k_cache;
    x.v_cache = v_cache;
    x.kv_indptr = d.kv_indptr;
    x.kv_indices = d.kv_indices;
    x.scale = scale;
  };
  auto lathe_kernel = [&](auto& x) {
    common(x);
    x.seq_lens = d.seq_lens;
    x.num_seqs = s;
    x.num_heads = static_cast<int32_t>(hq);
    x.num_kv_heads = static_cast<int32_t>(hkv);
    x.head_dim = static_cast<int32_t>(hd);
    x.block_size = block_size_;
    x.sliding_window = static_cast<int32_t>(c.sliding_window);
    x.workspace = attn_ws_.as<float>();
    x.dtype = options_.dtype;
  };
  if (path == AttnPath::kFlashInfer) {
    PrefillRunArgs pa;
    common(pa);
    pa.qo_indptr = d.query_start;
    pa.kv_last_page_len = d.kv_last_page_len;
    return prefill_->run(pa, stream_);
  }
  if (path == AttnPath::kDecode && decode_attention_) {
    DecodeAttentionArgs da;
    lathe_kernel(da);
    const DecodeSplitPlan plan = decode_attention_split_plan(
        s, hkv, props_.sm_count, decode_cluster_splits_, decode_split_blocks_per_sm_);
    da.max_splits = plan.max_splits;
    da.cluster_merge = plan.cluster_merge;
    da.min_split_tokens = decode_split_tokens_ > 0 ? decode_split_tokens_ : plan.min_split_tokens;
    da.counters = attn_counters_.as<int32_t>();
    return decode_attention(da, stream_);
  }
  PagedAttentionArgs pa;
  lathe_kernel(pa);
  pa.query_start = d.query_start;
  pa.num_tokens = t;
  pa.max_splits = splits;
  return paged_attention(pa, stream_);
}

const FusedDecodeChoice* CudaModelRunner::fused_for(int32_t t) const {
  return t >= 1 && t <= kDecodeGemvMaxM && fused_[static_cast<size_t>(t)].use
             ? &fused_[static_cast<size_t>(t)]
             : nullptr;
}

Status CudaModelRunner::forward(const StepArrays& d, int32_t t, int32_t s, int32_t r, AttnPath path,
                                int32_t splits) {
  return forward_with(d, t, s, r, path, splits, fused_for(t));
}

Status CudaModelRunner::forward_with(const StepArrays& d, int32_t t, int32_t s, int32_t r,
                                     AttnPath path, int32_t splits,
                                     const FusedDecodeChoice* fused) {
  LATHE_RETURN_IF_ERROR(embed(d, t));
  // A fused down projection completes the residual stream in its epilogue; an unfused one leaves
  // its output in proj_out_ for the next norm to add.
  const bool down_fused = fused != nullptr && fused->parts.down;
  for (int64_t li = 0; li < config_.num_layers; ++li)
    LATHE_RETURN_IF_ERROR(layer(d, li, t, s, path, splits, fused, !down_fused && li > 0));
  if (r == 0) return Status();
  return final_logits(d, r, down_fused && fused->lm_head ? fused : nullptr, !down_fused);
}

Status CudaModelRunner::embed(const StepArrays& d, int32_t t) {
  LATHE_RETURN_IF_ERROR(embedding(options_.dtype, weights_.token_embd, config_.vocab_size,
                                  config_.hidden_size, d.token_ids, t, residual_.as<float>(),
                                  stream_));
  return mark(Phase::kEmbedding);
}

AddRmsNormArgs CudaModelRunner::norm_args(const float* weight, bool add_pending,
                                          int32_t rows) const {
  AddRmsNormArgs a;
  a.residual = residual_.as<float>();
  a.x = add_pending ? proj_out_.get() : nullptr;
  a.weight = weight;
  a.out = xnorm_.get();
  a.rows = rows;
  a.dim = config_.hidden_size;
  a.eps = static_cast<float>(config_.rms_norm_eps);
  a.dtype = options_.dtype;
  return a;
}

DecodeGemvArgs CudaModelRunner::decode_gemv_args(int32_t m, float eps) const {
  DecodeGemvArgs g;
  g.dtype = options_.dtype;
  g.m = m;
  g.eps = eps;
  g.residual = residual_.as<float>();
  g.out_dtype = options_.dtype;
  return g;
}

QkvRopeKvArgs CudaModelRunner::qkv_rope_kv_args(const DeviceLayer& L, RopeStyle style, void* qkv,
                                                int32_t tokens, const int32_t* positions,
                                                const int64_t* slots, void* k_cache,
                                                void* v_cache) const {
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
  rk.q_norm = L.q_norm, rk.k_norm = L.k_norm;
  rk.eps = static_cast<float>(config_.rms_norm_eps);
  rk.k_cache = k_cache, rk.v_cache = v_cache;
  rk.slot_mapping = slots;
  rk.dtype = options_.dtype;
  return rk;
}

GemvRopeKv CudaModelRunner::rope_kv_epilogue(const QkvRopeKvArgs& rk) {
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
  return rp;
}

Status CudaModelRunner::layer(const StepArrays& d, int64_t li, int32_t t, int32_t s, AttnPath path,
                              int32_t splits, const FusedDecodeChoice* fused, bool pending) {
  const ModelConfig& c = config_;
  const DType dt = options_.dtype;
  const int64_t h = c.hidden_size, hq = c.num_heads, hkv = c.num_kv_heads, hd = c.head_dim;
  const int64_t qkv_dim = (hq + 2 * hkv) * hd, ffn = c.intermediate_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const int64_t e = 2;
  const DeviceLayer& L = weights_.layers[static_cast<size_t>(li)];
  const FusedParts fp = fused != nullptr ? fused->parts : FusedParts{};
  if (!fp.valid() || (fp.qkv && pending))
    return internal_error("fused decode parts " + fp.name() + " cannot run here (" +
                          (pending ? "the previous down projection is pending" : "invalid set") +
                          ")");
  uint8_t* k_cache = kv_.as<uint8_t>() + 2 * li * kv_layer_elems_ * e;
  uint8_t* v_cache = k_cache + kv_layer_elems_ * e;
  // A fused layer broken on purpose (test hooks, fused_decode_check.h).
  RopeStyle rope_style = c.rope_style;
  float prologue_eps = eps;
  if (fused != nullptr && hooks_.fault == FusedDecodeFault::kRopeStyle)
    rope_style = rope_style == RopeStyle::kNeox ? RopeStyle::kInterleaved : RopeStyle::kNeox;
  if (fused != nullptr && hooks_.fault == FusedDecodeFault::kNormEps) prologue_eps = 1e-2f;

  // The fused batch-1..4 parts (decode_gemv.h): the residual stream is updated by the o/down
  // epilogues, the norms run in the QKV and gate/up prologues, SwiGLU in the gate/up epilogue.
  DecodeGemvArgs g = decode_gemv_args(t, prologue_eps);

  AddRmsNormArgs norm = norm_args(L.attn_norm, pending, t);
  const QkvRopeKvArgs rk =
      qkv_rope_kv_args(L, rope_style, qkv_.get(), t, d.positions, d.slot_mapping, k_cache, v_cache);
  // RoPE and the KV write in a QKV epilogue (no QK norm): decode_gemv's (fused QKV) or gemv's.
  const GemvRopeKv rp = rope_kv_epilogue(rk);
  const LinearWeight qkv_w{L.qkv, qkv_dim, h, "qkv_proj"};
  const bool rope_fused = fp.qkv && fused->rope;
  const bool rope_epilogue = !fp.qkv && gemv_epilogues_ && t <= kGemvEpilogueMaxM &&
                             L.q_norm == nullptr && L.k_norm == nullptr &&
                             linear_->use_gemv(qkv_w, dt, t);
  if (fp.qkv) {
    g.w = L.qkv, g.n = qkv_dim, g.k = h;
    g.input = GemvInput::kRmsNorm, g.norm_weight = L.attn_norm, g.row_index = nullptr;
    g.output = rope_fused ? GemvOutput::kRopeKv : GemvOutput::kStore, g.y = qkv_.get();
    if (rope_fused) g.rope = rp;
    g.blocks_per_sm = fused->blocks_per_sm[0];
    LATHE_RETURN_IF_ERROR(decode_gemv(g, stream_));
  } else {
    LATHE_RETURN_IF_ERROR(add_rms_norm(norm, stream_));
    LATHE_RETURN_IF_ERROR(mark(Phase::kNorm));
    if (rope_epilogue) {
      LATHE_RETURN_IF_ERROR(gemv(dt, dt, xnorm_.get(), L.qkv, qkv_.get(), t, qkv_dim, h, stream_,
                                 GemvOutput::kRopeKv, rp));
    } else {
      LATHE_RETURN_IF_ERROR(linear_->run(qkv_w, dt, xnorm_.get(), qkv_.get(), t, stream_));
    }
  }
  LATHE_RETURN_IF_ERROR(mark(Phase::kQkvGemm));

  if (!rope_fused && !rope_epilogue) {
    LATHE_RETURN_IF_ERROR(qkv_rope_kv(rk, stream_));
    LATHE_RETURN_IF_ERROR(mark(Phase::kRopeKv));
  }

  LATHE_RETURN_IF_ERROR(attention(d, li, t, s, path, splits));
  LATHE_RETURN_IF_ERROR(mark(Phase::kAttention));

  if (fp.o) {
    g.w = L.o, g.n = h, g.k = hq * hd;
    g.input = GemvInput::kPlain, g.x = attn_out_.get();
    g.output = GemvOutput::kResidualAdd, g.residual_out = residual_.as<float>();
    g.blocks_per_sm = fused->blocks_per_sm[1];
    LATHE_RETURN_IF_ERROR(decode_gemv(g, stream_));
  } else {
    LATHE_RETURN_IF_ERROR(linear_->run(LinearWeight{L.o, h, hq * hd, "o_proj"}, dt, attn_out_.get(),
                                       proj_out_.get(), t, stream_));
  }
  LATHE_RETURN_IF_ERROR(mark(Phase::kOGemm));

  if (fp.gate_up) {
    g.w = L.gate_up, g.n = 2 * ffn, g.k = h;
    g.input = GemvInput::kRmsNorm, g.norm_weight = L.ffn_norm;
    g.output = GemvOutput::kSwiglu, g.y = act_.get();
    g.blocks_per_sm = fused->blocks_per_sm[2];
    LATHE_RETURN_IF_ERROR(decode_gemv(g, stream_));
    LATHE_RETURN_IF_ERROR(mark(Phase::kGateUpGemm));
  } else {
    norm.x = fp.o ? nullptr : proj_out_.get();
    norm.weight = L.ffn_norm;
    LATHE_RETURN_IF_ERROR(add_rms_norm(norm, stream_));
    LATHE_RETURN_IF_ERROR(mark(Phase::kNorm));
    const LinearWeight gate_up_w{L.gate_up, 2 * ffn, h, "gate_up_proj"};
    if (gemv_epilogues_ && t <= kGemvEpilogueMaxM && linear_->use_gemv(gate_up_w, dt, t)) {
      LATHE_RETURN_IF_ERROR(gemv(dt, dt, xnorm_.get(), L.gate_up, act_.get(), t, 2 * ffn, h,
                                 stream_, GemvOutput::kSwiglu));
      LATHE_RETURN_IF_ERROR(mark(Phase::kGateUpGemm));
    } else {
      LATHE_RETURN_IF_ERROR(linear_->run(gate_up_w, dt, xnorm_.get(), gate_up_.get(), t, stream_));
      LATHE_RETURN_IF_ERROR(mark(Phase::kGateUpGemm));
      LATHE_RETURN_IF_ERROR(swiglu(dt, gate_up_.get(), act_.get(), t, ffn, stream_));
      LATHE_RETURN_IF_ERROR(mark(Phase::kSwiglu));
    }
  }

  if (fp.down) {
    g.w = L.down, g.n = h, g.k = ffn;
    g.input = GemvInput::kPlain, g.x = act_.get();
    g.output = GemvOutput::kResidualAdd, g.residual_out = residual_.as<float>();
    g.blocks_per_sm = fused->blocks_per_sm[3];
    LATHE_RETURN_IF_ERROR(decode_gemv(g, stream_));
  } else {
    LATHE_RETURN_IF_ERROR(linear_->run(LinearWeight{L.down, h, ffn, "down_proj"}, dt, act_.get(),
                                       proj_out_.get(), t, stream_));
  }
  return mark(Phase::kDownGemm);
}

Status CudaModelRunner::final_logits(const StepArrays& d, int32_t r,
                                     const FusedDecodeChoice* fused_lm, bool pending) {
  const ModelConfig& c = config_;
  const DType dt = options_.dtype;
  const int64_t h = c.hidden_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  if (fused_lm != nullptr) {
    DecodeGemvArgs g;
    g.dtype = dt;
    g.m = r;
    g.eps = eps;
    g.residual = residual_.as<float>();
    g.w = weights_.lm_head, g.n = c.vocab_size, g.k = h;
    g.input = GemvInput::kRmsNorm, g.norm_weight = weights_.output_norm, g.row_index = d.lm_rows;
    g.output = GemvOutput::kStore, g.y = logits_.get(), g.out_dtype = DType::kF32;
    g.blocks_per_sm = fused_lm->blocks_per_sm[4];
    LATHE_RETURN_IF_ERROR(decode_gemv(g, stream_));
    return mark(Phase::kLmHead);
  }
  AddRmsNormArgs fin = norm_args(weights_.output_norm, pending, r);
  fin.row_index = d.lm_rows;
  LATHE_RETURN_IF_ERROR(add_rms_norm(fin, stream_));
  LATHE_RETURN_IF_ERROR(mark(Phase::kNorm));
  LATHE_RETURN_IF_ERROR(linear_->run(LinearWeight{weights_.lm_head, c.vocab_size, h, "lm_head"},
                                     DType::kF32, xnorm_.get(), logits_.get(), r, stream_));
  return mark(Phase::kLmHead);
}

}  // namespace lathe::cuda
