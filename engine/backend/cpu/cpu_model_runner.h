// The CPU model runner: the forward plan of a Llama-family model (engine/model/forward_plan.h:
// Llama 2/3/3.1/3.2, Mistral, Qwen2 with QKV bias, Qwen3 with per-head QK RMSNorm, SmolLM2)
// executed op by op over a paged float32 KV cache with the reference ops of cpu_ops.h. It is the
// numerical reference every other backend is tested against, so it fuses nothing that would change
// a result.
//
// One step (execute / compute_logits) runs every scheduled token through every layer, writes its
// K/V to its slot, and computes logits only for the sampled rows: the last token of each sampled
// sequence, or its trailing sample_count tokens when it carries drafts (execute() samples each row
// and keeps the accepted drafts, draft_acceptance.h). In the last layer, after attention (the last
// op that mixes rows), only those rows go on through the remaining ops (nothing else reads them).
// Weights are used in place (mmap) in their stored format (dense, GGUF blocks, or a quantized
// checkpoint's int / fp8 parts, dequantized tile by tile in linear()); norm weights and biases are
// converted to float32 once.
//
// Files: this one (creation, weights, KV cache, sampling), cpu_forward.cpp (the plan interpreter).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/backend/cpu/cpu_ops.h"
#include "engine/backend/cpu/cpu_runner_factory.h"
#include "engine/core/thread_pool.h"
#include "engine/model/forward_plan.h"
#include "engine/model/loaded_model.h"
#include "engine/runtime/model_runner.h"

namespace lathe {

class CpuModelRunner final : public ModelRunner {
 public:
  // See create_cpu_model_runner().
  static Result<std::unique_ptr<CpuModelRunner>> create(const LoadedModel& model,
                                                        const CpuRunnerOptions& options);

  const DeviceMemoryInfo& memory_info() const override { return memory_; }
  int64_t kv_block_bytes(int32_t block_size) const override;
  Status allocate_kv_cache(int32_t num_blocks, int32_t block_size) override;
  Result<ModelOutput> execute(const ModelInput& input) override;
  Result<std::vector<float>> compute_logits(const ModelInput& input) override;
  int64_t vocab_size() const override { return config_.vocab_size; }
  bool verifies_draft_tokens() const override { return true; }

  int num_threads() const { return pool_->num_threads(); }
  const ForwardPlan& plan() const { return plan_; }

 private:
  // A projection as the CPU runs it: its stored matrices (any format cpu::is_supported_matrix
  // accepts, used in place) and their biases in float32 (empty: none).
  struct Linear {
    std::vector<WeightMatrix> parts;
    std::vector<std::vector<float>> biases;
  };
  struct Layer {
    Linear qkv, o, gate_up, down;
    std::vector<float> attn_norm, ffn_norm;
    std::vector<float> q_norm, k_norm;  // empty without qk_norm
  };

  CpuModelRunner() = default;
  Status init_weights(const LoadedModel& model);
  Status init_dummy_weights(const CpuRunnerOptions& options, OnlineQuant online);
  Status check_input(const ModelInput& input) const;
  const Linear& linear(const Layer& layer, LinearSlot slot) const;
  // Runs the step; leaves logits of the sampled rows in logits_ ([num_sample_rows(), vocab]).
  Status forward(const ModelInput& input);
  // One op of a layer over `rows` token rows (cpu_forward.cpp).
  void run_layer_op(const ForwardOp& op, const Layer& layer, int64_t layer_index,
                    const ModelInput& input, int64_t rows);

  ModelConfig config_;
  ForwardPlan plan_;
  std::unique_ptr<ThreadPool> pool_;
  DeviceMemoryInfo memory_;

  TensorView token_embd_;
  Linear lm_head_;
  std::vector<float> output_norm_;
  std::vector<Layer> layers_;
  std::vector<float> inv_freq_;
  std::vector<std::unique_ptr<uint8_t[]>> owned_;  // dummy weights (and their online quantization)
  std::shared_ptr<const void> bound_owner_;        // keeps the bound weights' scheme alive

  // Paged KV cache: per layer K then V, each [num_blocks, block_size, kv_heads, head_dim] float32.
  struct FreeDeleter {
    void operator()(float* p) const;
  };
  std::unique_ptr<float, FreeDeleter> kv_;
  int32_t num_blocks_ = 0;
  int32_t block_size_ = 0;

  // Activations, grown as needed: T tokens of the step. x_: the residual stream; h_: a
  // projection's normalized input; tmp_: the o / down projection's output; gate_ holds the
  // activation after kActivation.
  std::vector<float> x_, h_, q_, k_, v_, attn_, gate_, up_, tmp_, logits_;
  std::vector<float> rope_cos_, rope_sin_;  // [T, head_dim / 2]: the step's angles, every layer
};

}  // namespace lathe
