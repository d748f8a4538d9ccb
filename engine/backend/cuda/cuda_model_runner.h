// The CUDA model runner: the Llama-family forward pass (Llama, Mistral, Qwen2 with QKV bias, Qwen3
// with per-head QK RMSNorm) on one GPU, over a paged KV cache of the runner's dtype, with sampling
// on the device. Mirrors CpuModelRunner's structure (engine/backend/cpu/cpu_model_runner.h), op for
// op:
//
//   residual = embedding(tokens)                                    f32 residual stream
//   per layer: x = add_rms_norm(residual, prev) ; qkv = x·Wqkvᵀ ; qkv_rope_kv (bias, qk-norm, RoPE,
//              KV write) ; a = attention ; o = a·Woᵀ ; x = add_rms_norm(residual, o) ;
//              gu = x·Wguᵀ ; s = swiglu(gu) ; prev = s·Wdownᵀ
//   x = add_rms_norm(residual, prev) for the sampled rows only ; logits = x·Wlmᵀ (f32)
//   process_logits (banned, penalties) ; sample_tokens
//
// Batch-1..4 steps (decode_gemv.h): when the load-time timing says so (and LATHE_CUDA_FUSED is not
// 0), the norms, SwiGLU and RoPE ride in the projections (norm in the QKV and gate/up prologue,
// residual add in the o/down epilogue, SwiGLU in the gate/up epilogue, RoPE and the KV write in the
// QKV epilogue unless LATHE_CUDA_FUSED_ROPE=0 or the model has QK norm): five kernels a layer
// instead of nine. Before it serves, the fused path is checked against the unfused one layer by
// layer (fused_decode_check.h).
//
// Files: this one (creation, steps, KV cache, graphs, profiling), cuda_model_runner_forward.cpp
// (the forward pass), cuda_model_runner_memory.cpp (buffers, the profiling step, memory plan),
// cuda_model_runner_tuning.cpp (timing of the fused path), fused_decode_check.cpp (its check).
// Decode steps use the tensor-core decode attention (decode_attention.h) when the shape allows and
// LATHE_CUDA_DECODE_ATTENTION is not "split" (which selects the split-KV kernel of
// paged_attention.h, also used for prefill without FlashInfer).
//
// A step: check and pack the inputs on the host (step_inputs.h), one asynchronous copy to the
// device, then either replay the CUDA graph of the decode bucket (decode-only steps of up to
// max_num_seqs sequences, padded to the bucket) or launch the layers eagerly (prefill and mixed
// steps: FlashInfer prefill attention when built in, else Lathe's split-KV kernel), then the
// sampler, one copy of the sampled tokens back, one synchronization. Every buffer is allocated at
// creation or in allocate_kv_cache(); serving never allocates device memory. One thread drives a
// runner (ModelRunner's contract).
//
// Lookahead (cuda_model_runner_lookahead.cpp): after launching a decode step of at most
// lookahead_max_seqs sequences whose input says the next step continues them, the runner launches
// that next step too (predict_next_decode: positions + 1; the sampled ids are copied into its token
// ids on the device) before waiting for this one, so the GPU does not idle through the host's turn.
// The next execute() compares its input with the prediction: equal, the step is already running;
// different, the runner waits for the predicted step, drops it and runs the real one. A dropped
// step only wrote K/V at its sequences' next positions, inside blocks they held, which the real
// steps (or a block's next owner) overwrite before anything reads them.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/cuda/add_rms_norm.h"
#include "engine/backend/cuda/cuda_common.h"
#include "engine/backend/cuda/cuda_runner_factory.h"
#include "engine/backend/cuda/cuda_weights.h"
#include "engine/backend/cuda/decode_attention.h"
#include "engine/backend/cuda/decode_gemv.h"
#include "engine/backend/cuda/fused_decode_check.h"
#include "engine/backend/cuda/gemm.h"
#include "engine/backend/cuda/linear.h"
#include "engine/backend/cuda/prefill_attention.h"
#include "engine/backend/cuda/qkv_rope_kv.h"
#include "engine/backend/cuda/step_inputs.h"
#include "engine/model/model_config.h"
#include "engine/runtime/model_runner.h"

namespace lathe::cuda {

// Phases of a step, for the profiling mode.
enum class Phase : int {
  kEmbedding,
  kNorm,
  kQkvGemm,
  kRopeKv,
  kAttention,
  kOGemm,
  kGateUpGemm,
  kSwiglu,
  kDownGemm,
  kLmHead,
  kSampler,
  kCount
};
const char* phase_name(Phase p);

// Wall-clock host time of the last execute(), microseconds.
struct StepTimes {
  double prepare_us = 0;  // checking and packing the inputs
  double launch_us = 0;   // copies, graph launch or kernel launches, sampler launches
  double wait_us = 0;     // waiting for the GPU
  double finish_us = 0;   // building the ModelOutput
  bool graph = false;     // replayed a CUDA graph
  int32_t bucket = 0;     // graph bucket (padded batch) when graph
};

class CudaModelRunner final : public ModelRunner {
 public:
  static Result<std::unique_ptr<CudaModelRunner>> create(const LoadedModel& model,
                                                         const CudaRunnerOptions& options);
  ~CudaModelRunner() override;

  const DeviceMemoryInfo& memory_info() const override { return memory_; }
  int64_t kv_block_bytes(int32_t block_size) const override;
  Status allocate_kv_cache(int32_t num_blocks, int32_t block_size) override;
  Result<ModelOutput> execute(const ModelInput& input) override;
  Result<std::vector<float>> compute_logits(const ModelInput& input) override;
  int64_t vocab_size() const override { return config_.vocab_size; }

  // For tools and tests.
  const StepTimes& last_step_times() const { return times_; }
  // Predicted steps that the next input matched (hits) or did not (misses, each a dropped step).
  int64_t lookahead_hits() const { return lookahead_hits_; }
  int64_t lookahead_misses() const { return lookahead_misses_; }
  // Profiling: steps run eagerly with CUDA events between phases; phase_ms() accumulates GPU time
  // per phase over the profiled steps.
  void set_profiling(bool on);
  const std::array<double, static_cast<size_t>(Phase::kCount)>& phase_ms() const {
    return phase_ms_;
  }
  int32_t profiled_steps() const { return profiled_steps_; }
  void reset_profile();
  const std::vector<LinearTiming>& linear_timings() const { return linear_->timings(); }
  const std::vector<int32_t>& graph_buckets() const { return buckets_; }
  bool uses_flashinfer() const { return prefill_ != nullptr; }
  // One entry per M in [1, kDecodeGemvMaxM] (empty when the fused path is off or does not fit).
  const std::vector<FusedDecodeChoice>& fused_decode_choices() const { return fused_report_; }
  bool uses_decode_attention() const { return decode_attention_; }
  std::string plan_summary() const;

 private:
  enum class AttnPath { kDecode, kFlashInfer, kOwn };

  CudaModelRunner() = default;
  Status init(const LoadedModel& model, const CudaRunnerOptions& options);
  Status create_prefill_attention();
  Status allocate_buffers();
  Status allocate_step_buffers();
  Status profile_step();
  // Times the fused batch-1..4 kernels per M and fills fused_; then chooses the fused parts by
  // whole-step timing and checks them (check_fused_decode).
  Status tune_fused_decode(void* x_scratch, void* y_scratch);
  // The step timing (choose_fused_parts) and the layer-by-layer check of every M in use
  // (fused_decode_check.h): an M whose fastest step is unfused, or that fails the check, is turned
  // off with a warning (an error when LATHE_CUDA_FUSED=1 forces the path). Runs on a scratch KV
  // cache of its own; the runner's cache is left as it was.
  Status check_fused_decode();
  Status run_fused_decode_checks(int32_t context, int32_t blocks);
  // The one-token step of m sequences after `context` positions over the scratch cache's `blocks`,
  // packed into step_dev_.
  Result<StepArrays> pack_check_step(int32_t m, int32_t context, int32_t blocks);
  // Times whole decode steps of ch->m sequences (CUDA graphs unless eager) for every valid set of
  // fused parts and keeps the fastest in ch (none: ch->use = false).
  Status choose_fused_parts(FusedDecodeChoice* ch, int32_t context, int32_t blocks);
  // Whole decode steps' times in microseconds (graph replay unless eager), one per variant
  // (`fused` entries; null: unfused): every variant is captured first, then timed in interleaved
  // rounds, keeping each one's fastest round, so that clock drift does not pick the winner.
  Result<std::vector<double>> time_decode_steps(const StepArrays& d, int32_t m, int32_t splits,
                                                const std::vector<const FusedDecodeChoice*>& fused);
  // The check at one M. `context_kv`: the scratch cache after the context prefill (restored before
  // every run); `rows`: f32 scratch for kDecodeGemvMaxM residual rows.
  Result<FusedDecodeCheck> check_fused_decode_at(const FusedDecodeChoice& ch, int32_t context,
                                                 int32_t blocks, const DeviceBuffer& context_kv,
                                                 const DeviceBuffer& rows);
  Status plan_memory();
  // The actionable error when one max_model_len sequence needs more KV cache than kv_budget.
  Status check_one_sequence_fits(int64_t kv_budget) const;
  Status capture_graphs();
  // Warms up and captures the decode step of bucket b (with event records between phases when
  // with_events, for the profiling mode).
  Status capture_one(int32_t b, bool with_events, cudaGraphExec_t* exec);

  // Packs, copies and runs the forward pass up to the logits. Leaves the packed step in packed_.
  Status run_forward(const ModelInput& input);
  // The forward pass up to the logits: fused layers when fused_ says so for this many tokens.
  Status forward(const StepArrays& d, int32_t num_tokens, int32_t num_seqs, int32_t num_lm_rows,
                 AttnPath path, int32_t splits);
  // The same with the batch-1..4 choice given (null: unfused).
  Status forward_with(const StepArrays& d, int32_t num_tokens, int32_t num_seqs,
                      int32_t num_lm_rows, AttnPath path, int32_t splits,
                      const FusedDecodeChoice* fused);
  const FusedDecodeChoice* fused_for(int32_t num_tokens) const;
  // Its parts. embed: the residual stream from the tokens. layer: layer `li`, fused when `fused` is
  // not null; `pending`: proj_out_ holds the previous layer's down projection, not yet added to
  // the residual (unfused layers leave theirs there, the next norm adds it). final_logits: the
  // final norm and the LM head for the rows d.lm_rows, in the LM head's prologue when `fused_lm`
  // is not null.
  Status embed(const StepArrays& d, int32_t num_tokens);
  Status layer(const StepArrays& d, int64_t li, int32_t num_tokens, int32_t num_seqs, AttnPath path,
               int32_t splits, const FusedDecodeChoice* fused, bool pending);
  Status final_logits(const StepArrays& d, int32_t num_lm_rows, const FusedDecodeChoice* fused_lm,
                      bool pending);
  Status attention(const StepArrays& d, int64_t layer, int32_t num_tokens, int32_t num_seqs,
                   AttnPath path, int32_t splits);
  // Argument structs the forward pass, its tuning and its check fill alike.
  // norm_args: RMSNorm of the residual stream into xnorm_, for `rows` rows, with `weight`; the
  // pending projection proj_out_ added first when add_pending.
  AddRmsNormArgs norm_args(const float* weight, bool add_pending, int32_t rows) const;
  // decode_gemv_args: the fields every fused batch-1..4 call shares (m rows, norm epsilon `eps`,
  // the residual stream).
  DecodeGemvArgs decode_gemv_args(int32_t m, float eps) const;
  // qkv_rope_kv_args: bias, QK norm, RoPE (`style`: the model's unless a test hook breaks it) and
  // the KV write of layer L for `tokens` rows of `qkv`; rope_kv_epilogue: the same as a QKV
  // epilogue (gemv_epilogue.h; no QK norm).
  QkvRopeKvArgs qkv_rope_kv_args(const DeviceLayer& L, RopeStyle style, void* qkv, int32_t tokens,
                                 const int32_t* positions, const int64_t* slots, void* k_cache,
                                 void* v_cache) const;
  static GemvRopeKv rope_kv_epilogue(const QkvRopeKvArgs& rk);
  // The sampler for a packed step, then copies of its tokens (and top logprobs) into the host
  // buffers given.
  Status sample(const PackedStep& p, PinnedBuffer& tokens_host, PinnedBuffer& top_host);
  // Lookahead. launch_ahead: after step `in` is launched, launches its predicted successor when
  // allowed (sets ahead_). take_ahead: whether `in` is the pending predicted step (then it becomes
  // the current one); on a miss waits for the predicted step and drops it. drop_ahead: the same for
  // callers other than execute().
  Status launch_ahead(const ModelInput& in);
  Result<bool> take_ahead(const ModelInput& in);
  Status drop_ahead();
  Status ensure_events();
  Status record_event(Phase p);
  Status record_start();
  Status mark(Phase p);
  Status collect_profile();
  int32_t bucket_for(int32_t num_seqs) const;

  ModelConfig config_;
  CudaRunnerOptions options_;
  DeviceProps props_;
  cudaStream_t stream_ = nullptr;
  DeviceMemoryInfo memory_;
  int64_t free_at_start_ = 0;

  DeviceWeights weights_;
  DeviceBuffer inv_freq_;
  std::unique_ptr<Gemm> gemm_;
  std::unique_ptr<LinearDispatcher> linear_;
  std::unique_ptr<PrefillAttention> prefill_;
  bool force_own_attention_ = false;
  bool decode_attention_ = false;  // decode steps through decode_attention.h
  // The decode attention's split policy (decode_attention.h); LATHE_CUDA_DECODE_SPLIT_TOKENS fixes
  // the shortest split (0: the policy's), LATHE_CUDA_DECODE_SPLIT_BLOCKS_PER_SM the block budget.
  int32_t decode_split_tokens_ = 0;
  int decode_split_blocks_per_sm_ = kDecodeAttentionBlocksPerSm;
  // Largest split count merged in a thread-block cluster (0: the workspace merge only). Where the
  // policy merges in clusters (decode_attention_cluster_pays: batch 1-2 of 8 KV heads on an H200)
  // the split count is capped at it.
  int32_t decode_cluster_splits_ = 0;
  bool fused_allowed_ = true;       // LATHE_CUDA_FUSED != 0
  bool fused_forced_ = false;       // LATHE_CUDA_FUSED == 1: wherever it fits, untimed
  bool fused_rope_allowed_ = true;  // LATHE_CUDA_FUSED_ROPE != 0
  // Unfused layers at M <= kGemvEpilogueMaxM: RoPE/KV and SwiGLU in the gemv epilogues
  // (gemv_epilogue.h) where gemv serves; LATHE_CUDA_GEMV_EPILOGUES=0 keeps the separate kernels.
  bool gemv_epilogues_ = true;
  FusedDecodeTestHooks hooks_;  // tests only (fused_decode_check.h)
  std::array<FusedDecodeChoice, kDecodeGemvMaxM + 1> fused_{};
  std::vector<FusedDecodeChoice> fused_report_;

  // Activations for up to max_tokens_ tokens and max_seqs_ sequences.
  int32_t max_tokens_ = 0, max_seqs_ = 0, max_model_len_ = 0;
  DeviceBuffer residual_, xnorm_, qkv_, attn_out_, proj_out_, gate_up_, act_, logits_;
  DeviceBuffer attn_ws_, attn_counters_, counts_, sampled_, top_;
  DeviceBuffer step_dev_;
  PinnedBuffer step_host_, sampled_host_, top_host_;
  StepLimits limits_;
  PackedStep packed_;
  cudaEvent_t step_done_ = nullptr;  // recorded after the current step's copies to the host

  // Lookahead: the predicted step in flight, with its own host buffers and completion event
  // (swapped with the current step's on a hit).
  struct Ahead {
    bool pending = false;  // launched and not yet taken or dropped
    ModelInput expected;   // its input; token ids set once the current step's tokens are read
    PackedStep packed;
  };
  Ahead ahead_;
  int32_t lookahead_max_seqs_ = 0;
  PinnedBuffer ahead_step_host_, ahead_sampled_host_, ahead_top_host_;
  cudaEvent_t ahead_done_ = nullptr;
  int64_t lookahead_hits_ = 0, lookahead_misses_ = 0;
  AttnPath last_path_ = AttnPath::kDecode;

  // KV cache: per layer K then V, each [num_blocks, block_size, num_kv_heads, head_dim].
  DeviceBuffer kv_;
  int32_t num_blocks_ = 0, block_size_ = 16;
  int64_t kv_layer_elems_ = 0;

  // Decode graphs by bucket size.
  std::vector<int32_t> buckets_;
  std::map<int32_t, cudaGraphExec_t> graphs_;
  std::map<int32_t, cudaGraphExec_t> profile_graphs_;

  StepTimes times_;
  bool profiling_ = false;  // profiling mode requested
  bool recording_ = false;  // mark() records events (while launching or capturing a profiled step)
  bool capturing_ = false;  // inside a stream capture: events become graph nodes
  bool profile_graphs_failed_ = false;
  size_t profile_graph_events_ = 0;
  std::vector<cudaEvent_t> events_;
  std::vector<Phase> event_phase_;
  size_t events_used_ = 0;
  std::array<double, static_cast<size_t>(Phase::kCount)> phase_ms_{};
  int32_t profiled_steps_ = 0;
};

}  // namespace lathe::cuda
