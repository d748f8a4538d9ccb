#include "engine/model/forward_plan.h"

namespace lathe {
namespace {

const char* norm_name(NormSlot s) {
  switch (s) {
    case NormSlot::kAttn:
      return "attn";
    case NormSlot::kFfn:
      return "ffn";
    case NormSlot::kFinal:
      return "final";
  }
  return "?";
}

const char* linear_name(LinearSlot s) {
  switch (s) {
    case LinearSlot::kQkv:
      return "qkv";
    case LinearSlot::kO:
      return "o";
    case LinearSlot::kGateUp:
      return "gate_up";
    case LinearSlot::kDown:
      return "down";
    case LinearSlot::kLmHead:
      return "lm_head";
  }
  return "?";
}

ForwardOp norm(NormSlot s) {
  ForwardOp op;
  op.kind = OpKind::kNorm;
  op.norm = s;
  return op;
}

ForwardOp linear(LinearSlot s, bool bias = false) {
  ForwardOp op;
  op.kind = OpKind::kLinear;
  op.linear = s;
  op.bias = bias;
  return op;
}

ForwardOp simple(OpKind kind, bool reduce = false) {
  ForwardOp op;
  op.kind = kind;
  op.reduce = reduce;
  return op;
}

}  // namespace

std::string ForwardOp::name() const {
  switch (kind) {
    case OpKind::kNorm:
      return std::string("norm(") + norm_name(norm) + ")";
    case OpKind::kLinear:
      return std::string("linear(") + linear_name(linear) + (bias ? "+bias" : "") + ")";
    case OpKind::kQkNorm:
      return "qk_norm";
    case OpKind::kRope:
      return "rope";
    case OpKind::kKvWrite:
      return "kv_write";
    case OpKind::kAttention:
      return "attention";
    case OpKind::kResidualAdd:
      return reduce ? "residual_add(all_reduce)" : "residual_add";
    case OpKind::kActivation:
      return "activation(swiglu)";
    case OpKind::kGatherVocab:
      return reduce ? "gather_vocab(all_gather)" : "gather_vocab";
  }
  return "?";
}

bool ForwardPlan::has(OpKind kind) const {
  return find(kind) >= 0;
}

int32_t ForwardPlan::find(OpKind kind) const {
  for (size_t i = 0; i < layer.size(); ++i)
    if (layer[i].kind == kind) return static_cast<int32_t>(i);
  return -1;
}

std::string ForwardPlan::describe() const {
  std::string s = "layer:";
  for (const ForwardOp& op : layer) s += " " + op.name();
  s += "; head:";
  for (const ForwardOp& op : head) s += " " + op.name();
  return s;
}

ForwardPlan make_forward_plan(const ModelConfig& c, int32_t world_size) {
  ForwardPlan p;
  p.rms_norm_eps = static_cast<float>(c.rms_norm_eps);
  p.rope_style = c.rope_style;
  p.sliding_window = static_cast<int32_t>(c.sliding_window);
  p.tied_embeddings = c.tie_word_embeddings;
  p.world_size = world_size;
  const bool split = world_size > 1;

  p.layer.push_back(norm(NormSlot::kAttn));
  p.layer.push_back(linear(LinearSlot::kQkv, c.attention_bias));
  if (c.qk_norm) p.layer.push_back(simple(OpKind::kQkNorm));
  p.layer.push_back(simple(OpKind::kRope));
  p.layer.push_back(simple(OpKind::kKvWrite));
  p.layer.push_back(simple(OpKind::kAttention));
  p.layer.push_back(linear(LinearSlot::kO));
  p.layer.push_back(simple(OpKind::kResidualAdd, split));
  p.layer.push_back(norm(NormSlot::kFfn));
  p.layer.push_back(linear(LinearSlot::kGateUp));
  ForwardOp act = simple(OpKind::kActivation);
  act.activation = ActivationKind::kSwiglu;
  p.layer.push_back(act);
  p.layer.push_back(linear(LinearSlot::kDown));
  p.layer.push_back(simple(OpKind::kResidualAdd, split));

  p.head.push_back(norm(NormSlot::kFinal));
  p.head.push_back(linear(LinearSlot::kLmHead));
  p.head.push_back(simple(OpKind::kGatherVocab, split));
  return p;
}

}  // namespace lathe
