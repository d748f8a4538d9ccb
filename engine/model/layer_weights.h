// The tensors of a loaded model as the forward plan (forward_plan.h) reads them: per layer the four
// projections (each a LinearGroup of stored matrices in their own formats) and the norm and bias
// vectors; the embedding, the final norm and the LM head. Views into the LoadedModel's
// memory-mapped files: a ModelWeights must not outlive its LoadedModel. Both backends build their
// device copies (or use these in place, on the CPU) from this one description.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/forward_plan.h"
#include "engine/model/weight_matrix.h"

namespace lathe {

struct LoadedModel;
class WeightScheme;

// One projection of the plan: one or several stored matrices that read the same input, stacked by
// output rows (q|k|v for the QKV projection, gate|up for the MLP's), each with an optional bias.
struct LinearGroup {
  std::vector<WeightMatrix> parts;
  std::vector<TensorView> biases;  // per part: [part.n] (f32/f16/bf16) or empty (ndim 0)

  int64_t n() const;  // rows of all parts
  int64_t k() const;  // the shared input width
  bool has_bias() const;
  int64_t bytes() const;  // of the matrices
};

struct LayerWeights {
  LinearGroup qkv;      // q [Hq*D], k [Hkv*D], v [Hkv*D] rows; biases with attention_bias
  LinearGroup o;        // [hidden, Hq*D]
  LinearGroup gate_up;  // gate [ffn], up [ffn] rows
  LinearGroup down;     // [hidden, ffn]
  TensorView attn_norm, ffn_norm;  // [hidden]
  TensorView q_norm, k_norm;       // [head_dim] with qk_norm, else empty
};

struct ModelWeights {
  TensorView token_embd;   // [vocab, hidden], any type the embedding reads
  TensorView output_norm;  // [hidden]
  LinearGroup lm_head;     // one part: `output`, or the embedding when tied
  std::vector<LayerWeights> layers;
  // The checkpoint scheme that built the matrices; it owns what online quantization made, so the
  // matrices stay valid while this (or a copy of the pointer) lives.
  std::shared_ptr<const WeightScheme> scheme;

  // The projection `slot` of layer `layer` (the LM head for LinearSlot::kLmHead, any layer).
  const LinearGroup& linear(int64_t layer, LinearSlot slot) const;

  // Bytes of every projection's matrices (the layers and the LM head unless tied).
  int64_t linear_bytes(bool count_tied_head = false) const;
  // Bytes of everything bound, as stored: the embedding, every matrix with its scales, zero points
  // and g_idx, norms and biases (the tied LM head once).
  int64_t total_bytes() const;
};

// The storage format of each group of tensors, in the order embedding, attention, mlp, norms,
// output: {"attention", "int4 g128 (gptq)"}, {"mlp", "int4 g128 (gptq)+int8 per-channel (gptq)"},
// {"output", "tied"}; several formats in a group are joined with '+', most bytes first. Dense and
// GGUF matrices are named by their type ("bf16", "q4_k").
std::vector<std::pair<std::string, std::string>> summarize_formats(const ModelConfig& config,
                                                                   const ModelWeights& weights);

// Binds `model`'s tensors through its checkpoint's weight scheme (weight_scheme.h; with an online
// --quantization, the projections are quantized here and a load-log line says so). Not for
// ModelFormat::kDummy (whose weights the backends generate).
Result<ModelWeights> bind_model_weights(const LoadedModel& model);

// The matrices of random (ModelFormat::kDummy) weights in the order of their random streams, which
// every backend follows so that one seed gives the same weights on the CPU and the GPU:
// token_embd, output (untied only), then per layer q k v o gate up down (canonical names).
struct MatrixShape {
  std::string name;
  int64_t n = 0, k = 0;
};
std::vector<MatrixShape> dummy_matrix_order(const ModelConfig& config);

}  // namespace lathe
