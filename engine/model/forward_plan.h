// The forward pass of a Llama-family decoder, written once, as data. make_forward_plan() resolves
// the architecture's variants from the ModelConfig (QKV bias of Qwen2, QK norm of Qwen3, RoPE
// style, sliding window, tied embeddings, the tensor-parallel reduction points); the CPU reference
// backend executes the ops one by one, and the CUDA backend walks the same list, fusing neighbours
// it has kernels for (its choice, e.g. the norm into the next projection's prologue). A new
// architecture is a change here and, only if it needs an op the backends lack, one op in each
// backend.
//
// Every token row carries the residual stream (f32) and, within a layer, the tensors the ops name:
// x (a projection's normalized input), qkv, attn (attention output), proj (the o or down
// projection's output), gate|up, act. One decoder layer of Llama / Mistral / Qwen2 / Qwen3:
//   norm(attn)           x = rms_norm(residual) * attn_norm
//   linear(qkv[+bias])   q|k|v = x · [Wq|Wk|Wv]ᵀ (+ [bq|bk|bv])          (Qwen2: bias)
//   qk_norm              each q and k head: rms_norm(head) * q_norm|k_norm  (Qwen3 only)
//   rope                 q and k heads rotated at the token's position (the plan's rope_style)
//   kv_write             k, v stored at the token's KV-cache slot
//   attention            attn = causal attention over the sequence's cache (sliding window)
//   linear(o)            proj = attn · Woᵀ
//   residual_add         residual += all_reduce(proj)   (the reduction point of tensor parallelism)
//   norm(ffn)            x = rms_norm(residual) * ffn_norm
//   linear(gate_up)      gate|up = x · [Wgate|Wup]ᵀ
//   activation(swiglu)   act = silu(gate) * up
//   linear(down)         proj = act · Wdownᵀ
//   residual_add         residual += all_reduce(proj)
// The head, for the rows whose logits are asked for:
//   norm(final)  linear(lm_head)  gather_vocab (each rank's vocabulary slice joined)
// Before the layers every backend embeds the tokens (residual = token_embd[token]).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/model/model_config.h"

namespace lathe {

enum class OpKind : uint8_t {
  kNorm,
  kLinear,
  kQkNorm,
  kRope,
  kKvWrite,
  kAttention,
  kResidualAdd,
  kActivation,
  kGatherVocab,
};
enum class NormSlot : uint8_t { kAttn, kFfn, kFinal };
enum class LinearSlot : uint8_t { kQkv, kO, kGateUp, kDown, kLmHead };
enum class ActivationKind : uint8_t { kSwiglu };

struct ForwardOp {
  OpKind kind = OpKind::kNorm;
  NormSlot norm = NormSlot::kAttn;       // kNorm
  LinearSlot linear = LinearSlot::kQkv;  // kLinear
  bool bias = false;                     // kLinear: adds the projection's biases
  bool reduce = false;  // kResidualAdd: sum over the ranks first (world size > 1); kGatherVocab
  ActivationKind activation = ActivationKind::kSwiglu;  // kActivation

  std::string name() const;  // "norm(attn)", "linear(qkv+bias)", "residual_add(all_reduce)"
  bool operator==(const ForwardOp&) const = default;
};

struct ForwardPlan {
  std::vector<ForwardOp> layer;  // every decoder layer, in order
  std::vector<ForwardOp> head;   // after the last layer, on the logits rows
  // Numerics the ops read.
  float rms_norm_eps = 1e-5f;
  RopeStyle rope_style = RopeStyle::kNeox;
  int32_t sliding_window = 0;  // 0: full causal attention
  bool tied_embeddings = false;
  int32_t world_size = 1;  // ranks the weights are split over

  // Whether a layer op of this kind is in the plan (e.g. kQkNorm).
  bool has(OpKind kind) const;
  // The index in `layer` of the first op of this kind, or -1.
  int32_t find(OpKind kind) const;
  std::string describe() const;  // one line: the layer's ops, then the head's
};

// The projection of `slot` among a model's weights in any backend's form: a layer struct with the
// members qkv, o, gate_up and down, and the LM head (which belongs to no layer).
template <typename Layer, typename Linear>
const Linear& projection(const Layer& layer, const Linear& lm_head, LinearSlot slot) {
  switch (slot) {
    case LinearSlot::kQkv:
      return layer.qkv;
    case LinearSlot::kO:
      return layer.o;
    case LinearSlot::kGateUp:
      return layer.gate_up;
    case LinearSlot::kDown:
      return layer.down;
    case LinearSlot::kLmHead:
      break;
  }
  return lm_head;
}

// The plan for `config` with the weights split over `world_size` ranks (1: no reductions).
ForwardPlan make_forward_plan(const ModelConfig& config, int32_t world_size = 1);

}  // namespace lathe
