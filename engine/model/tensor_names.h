// Translation of file tensor names to Lathe's canonical names (listed in weight_store.h), and the
// tensors a config implies, with their PyTorch-order shapes.
//
//   Hugging Face                                   GGUF                      canonical
//   model.embed_tokens.weight                      token_embd.weight         token_embd
//   model.norm.weight                              output_norm.weight        output_norm
//   lm_head.weight                                 output.weight             output
//   model.layers.N.input_layernorm.weight          blk.N.attn_norm.weight    blk.N.attn_norm
//   model.layers.N.self_attn.q_proj.weight         blk.N.attn_q.weight       blk.N.attn_q     (k, v
//   alike) model.layers.N.self_attn.q_proj.bias           blk.N.attn_q.bias blk.N.attn_q_bias (k, v
//   alike) model.layers.N.self_attn.o_proj.weight         blk.N.attn_output.weight
//   blk.N.attn_output model.layers.N.self_attn.q_norm.weight         blk.N.attn_q_norm.weight
//   blk.N.attn_q_norm (k alike) model.layers.N.post_attention_layernorm.weight
//   blk.N.ffn_norm.weight     blk.N.ffn_norm model.layers.N.mlp.gate_proj.weight
//   blk.N.ffn_gate.weight     blk.N.ffn_gate   (up, down alike)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/model/model_config.h"

namespace lathe {

// The parts quantized checkpoints store next to (or instead of) a projection's weight: GPTQ / AWQ
// (qweight, qzeros, scales, g_idx), compressed-tensors (weight_packed, weight_scale,
// weight_zero_point, weight_g_idx, weight_shape), FP8 (weight_scale, weight_scale_inv,
// input_scale). A Hugging Face "<module>.<part>" maps to the canonical "<projection>.<part>"
// ("model.layers.0.self_attn.q_proj.qweight" -> "blk.0.attn_q.qweight"); weight_scheme.h's
// handlers read them.
inline constexpr std::string_view kQuantizedParts[] = {"qweight",
                                                       "qzeros",
                                                       "scales",
                                                       "g_idx",
                                                       "weight_packed",
                                                       "weight_scale",
                                                       "weight_zero_point",
                                                       "weight_g_idx",
                                                       "weight_shape",
                                                       "weight_scale_inv",
                                                       "input_scale"};

// Canonical name of a tensor, or "" for tensors Lathe does not use (rotary inv_freq, rope_freqs,
// anything unknown). Quantized parts of a projection keep their part name (above).
std::string canonical_name_from_hf(std::string_view hf_name);
std::string canonical_name_from_gguf(std::string_view gguf_name);

// The inverse maps: a canonical name's tensor name in a Hugging Face checkpoint
// ("model.layers.0.self_attn.q_proj.weight", "lm_head.weight") or a GGUF file
// ("blk.0.attn_q.weight", "blk.0.attn_q.bias"); "" for names that are not canonical.
std::string hf_name_from_canonical(std::string_view canonical);
std::string gguf_name_from_canonical(std::string_view canonical);

struct ExpectedTensor {
  std::string name;            // canonical
  std::vector<int64_t> shape;  // PyTorch order
  bool float_only = false;     // norms and biases: must be stored as f32 / f16 / bf16
};

// Every tensor a model with this config needs, in a stable order (globals, then layer by layer).
std::vector<ExpectedTensor> expected_tensors(const ModelConfig& config);

// The group a canonical name belongs to, for per-group dtype summaries: "embedding", "attention",
// "mlp", "norms" or "output".
const char* tensor_group(std::string_view canonical_name);

}  // namespace lathe
