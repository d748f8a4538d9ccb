// The model on the GPU: its weights (cuda_weights.h), the forward plan it follows (engine/model/
// forward_plan.h), the activation buffers of one step, the attention kernels' configuration, and
// the forward pass over a KV cache (cuda_forward.cpp). It walks the plan's ops and fuses neighbours
// it has kernels for:
//   residual_add + norm          -> add_rms_norm (the add of an o/down projection is left pending
//                                   until the next norm reads the residual stream)
//   linear(qkv) [+qk_norm] + rope + kv_write -> the projection, then qkv_rope_kv (bias, QK norm,
//                                   RoPE, KV write in one kernel), or gemv's RoPE/KV epilogue
//   linear(gate_up) + activation -> the projection, then swiglu, or gemv's SwiGLU epilogue
//   at batch 1..4 (decode_gemv.h, when the load-time timing picked it): norm in the QKV and gate/up
//   prologues, residual add in the o/down epilogues, SwiGLU and RoPE/KV in the epilogues: five
//   kernels a layer instead of nine, checked layer by layer against the unfused path before it
//   serves (fused_decode_check.h)
//   norm(final) + linear(lm_head) -> the LM head's prologue at batch 1..4 (when faster)
// Attention by path: FlashInfer's FA2 for prefill and mixed steps when built in, the tensor-core
// decode kernel (decode_attention.h) for decode steps, Lathe's split-KV kernel (paged_attention.h)
// otherwise. A plan op this backend has no kernel for is refused at creation.
//
// The pieces (embed, layer, final_logits) are public so that the fused path's tuning and check
// run exactly the code that serves, one layer at a time.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/cuda/add_rms_norm.h"
#include "engine/backend/cuda/cuda_switches.h"
#include "engine/backend/cuda/cuda_weights.h"
#include "engine/backend/cuda/decode_gemv.h"
#include "engine/backend/cuda/device_context.h"
#include "engine/backend/cuda/fused_decode_check.h"
#include "engine/backend/cuda/kv_cache.h"
#include "engine/backend/cuda/linear.h"
#include "engine/backend/cuda/prefill_attention.h"
#include "engine/backend/cuda/qkv_rope_kv.h"
#include "engine/backend/cuda/step_inputs.h"
#include "engine/backend/cuda/step_profiler.h"
#include "engine/model/forward_plan.h"
#include "engine/model/model_config.h"
#include "engine/runtime/model_io.h"

namespace lathe {
struct LoadedModel;
}

namespace lathe::cuda {

struct CudaModelOptions {
  DType dtype = DType::kBF16;    // activations and weights
  int32_t max_tokens = 8192;     // tokens per step: activation buffers
  int32_t max_seqs = 256;        // sequences per step: attention workspaces
  int32_t max_logit_rows = 256;  // logits rows per step (sequences, or their sampled rows)
  int32_t max_model_len = 0;     // tokens per sequence
  int32_t block_size = 16;       // KV tokens per block
  uint64_t dummy_seed = 0;
  double gpu_memory_utilization = 0.9;  // the weights must fit in this share (check_weights_fit)
  CudaSwitches switches;
  ParallelConfig parallel;
};

enum class AttnPath { kDecode, kFlashInfer, kOwn };

// One forward pass: the packed step's device arrays and sizes, and how attention runs.
struct ForwardStep {
  StepArrays d;
  int32_t num_tokens = 0;
  int32_t num_seqs = 0;
  int32_t num_lm_rows = 0;  // rows of logits computed (d.lm_rows)
  AttnPath path = AttnPath::kDecode;
  int32_t splits = 1;  // split-KV parts (paged_attention)
};

// Activation buffers for up to max_tokens tokens and max_seqs sequences.
struct Activations {
  DeviceBuffer residual;  // f32 [T, hidden]: the residual stream
  DeviceBuffer xnorm;     // [T, hidden]: a projection's normalized input
  DeviceBuffer qkv;       // [T, (Hq + 2 Hkv) D]
  DeviceBuffer attn_out;  // [T, Hq D]
  DeviceBuffer proj_out;  // [T, hidden]: o / down projection output (pending residual add)
  DeviceBuffer gate_up;   // [T, 2 ffn]
  DeviceBuffer act;       // [T, ffn]
  DeviceBuffer logits;    // f32 [S, vocab]
  DeviceBuffer attn_ws, attn_counters;  // split-KV workspace; decode merge counters (zero)
  DeviceBuffer dequant_ws;              // stored-format weights dequantized for a GEMM (linear.h)
};

class CudaModel {
 public:
  // Uploads the weights (and the RoPE frequencies).
  static Result<std::unique_ptr<CudaModel>> create(const LoadedModel& model,
                                                   const CudaModelOptions& options,
                                                   std::shared_ptr<CudaDeviceContext> context);
  // Allocates the activations for the options' limits, the linear dispatcher and the prefill
  // attention's workspaces (after the caller checked that one sequence's KV cache fits).
  Status allocate_activations();

  // The forward pass up to the logits of step.d.lm_rows, over `kv`: fused layers where the
  // batch-1..4 choice for step.num_tokens says so. `prof` (may be null) marks the phases.
  Status forward(const ForwardStep& step, const CudaKvCache& kv, StepProfiler* prof) const;
  // The same with the batch-1..4 choice given (null: unfused).
  Status forward_with(const ForwardStep& step, const CudaKvCache& kv,
                      const FusedDecodeChoice* fused, StepProfiler* prof) const;
  // Its parts. embed: the residual stream from the tokens. layer: layer `li`, fused when `fused`
  // is not null; `pending` (in and out): proj_out holds a projection not yet added to the residual
  // (unfused o and down projections leave theirs there, the next norm adds it; fused ones and 4-bit
  // tiled ones add it in their epilogue). final_logits: the
  // final norm and the LM head for the rows d.lm_rows, in the LM head's prologue when `fused_lm`.
  Status embed(const ForwardStep& step, StepProfiler* prof) const;
  Status layer(const ForwardStep& step, const CudaKvCache& kv, int64_t li,
               const FusedDecodeChoice* fused, bool* pending, StepProfiler* prof) const;
  Status final_logits(const ForwardStep& step, const FusedDecodeChoice* fused_lm, bool pending,
                      StepProfiler* prof) const;

  // The attention path and split count of a step of these sizes (eager; graphs replay kDecode).
  AttnPath path_for(bool decode) const;
  int32_t splits_for(AttnPath path, int32_t num_tokens) const;
  // FlashInfer's per-step host planning (kFlashInfer only), from the packed step's host arrays.
  Status plan_prefill(const StepArrays& host, int32_t num_seqs) const;
  // Check, pack, copy and run `in` eagerly over `kv` (prefill and mixed steps, the fused check's
  // context). Leaves the step in `packed`.
  Status run_eager(const ModelInput& in, const StepLimits& limits, PinnedBuffer& host,
                   DeviceBuffer& dev, PackedStep* packed, const CudaKvCache& kv,
                   StepProfiler* prof) const;

  // The KV cache this model reads: `num_blocks` blocks of `block_size` tokens (dtype: the
  // activations').
  KvLayout kv_layout(int32_t num_blocks, int32_t block_size) const;
  // A new block size for the caches the model will read (FlashInfer plans in pages).
  Status set_block_size(int32_t block_size);

  // Argument structs the forward pass, its tuning and its check fill alike (cuda_forward.cpp).
  AddRmsNormArgs norm_args(const float* weight, bool add_pending, int32_t rows) const;
  DecodeGemvArgs decode_gemv_args(int32_t m, float eps) const;
  QkvRopeKvArgs qkv_rope_kv_args(const DeviceLayer& L, RopeStyle style, void* qkv, int32_t tokens,
                                 const int32_t* positions, const int64_t* slots,
                                 const KvLayerView& kv) const;
  static GemvRopeKv rope_kv_epilogue(const QkvRopeKvArgs& rk);

  // The batch-1..4 choices in use (index M; set by the tuning, fused_decode_tuning.cpp).
  const FusedDecodeChoice* fused_for(int32_t num_tokens) const;
  void set_fused_choices(const std::array<FusedDecodeChoice, kDecodeGemvMaxM + 1>& choices) {
    fused_ = choices;
  }
  // Whether the fused batch-1..4 kernels take this model's projections (formats and shapes).
  bool fused_decode_supported(std::string* why) const;

  const ModelConfig& config() const { return config_; }
  const ForwardPlan& plan() const { return plan_; }
  const CudaModelOptions& options() const { return options_; }
  const DeviceProps& props() const { return ctx_->props(); }
  cudaStream_t stream() const { return ctx_->stream(); }
  const DeviceWeights& weights() const { return weights_; }
  const Activations& activations() const { return act_; }
  LinearDispatcher& linear() { return *linear_; }
  const LinearDispatcher& linear() const { return *linear_; }
  const float* inv_freq() const { return inv_freq_.as<float>(); }
  bool has_flashinfer() const { return prefill_ != nullptr; }
  // Drops FlashInfer (its kernels failed at load): prefill takes Lathe's split-KV kernel.
  void drop_flashinfer() { prefill_.reset(); }
  bool uses_decode_attention() const { return decode_attention_; }
  // Drops the tensor-core decode attention (it failed at load): decode takes the split-KV kernel.
  void drop_decode_attention() { decode_attention_ = false; }
  int32_t decode_cluster_splits() const { return decode_cluster_splits_; }
  int decode_split_blocks_per_sm() const { return decode_split_blocks_per_sm_; }
  int64_t weight_bytes() const { return weights_.storage.bytes(); }

 private:
  CudaModel() = default;
  Status init(const LoadedModel& model);
  Status create_prefill_attention();
  Status attention(const ForwardStep& step, const KvLayerView& kv, int64_t li) const;

  ModelConfig config_;
  ForwardPlan plan_;
  CudaModelOptions options_;
  std::shared_ptr<CudaDeviceContext> ctx_;
  DeviceWeights weights_;
  DeviceBuffer inv_freq_;
  std::unique_ptr<LinearDispatcher> linear_;
  std::unique_ptr<PrefillAttention> prefill_;
  Activations act_;
  bool decode_attention_ = false;
  bool fp8_tensor_cores_ =
      false;  // FP8 parts take W8A8 above batch 8 (LinearDispatcher::set_fp8_gemm)
  int32_t decode_split_tokens_ = 0;  // 0: the policy's
  int decode_split_blocks_per_sm_ = 0;
  int32_t decode_cluster_splits_ = 0;  // 0: the workspace merge only
  FusedDecodeTestHooks hooks_;         // tests only (fused_decode_check.h)
  std::array<FusedDecodeChoice, kDecodeGemvMaxM + 1> fused_{};
};

}  // namespace lathe::cuda
