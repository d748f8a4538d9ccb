// The CUDA model runner: ModelRunner over the CUDA backend's concepts, each in its own files:
//   CudaDeviceContext  device_context.h   the device, its stream, cuBLASLt, the memory planner
//                                          (shared with other runners on the device)
//   CudaModel          cuda_model.h       weights + the forward plan's ops as kernels
//   CudaKvCache        kv_cache.h         the paged KV cache and its layout descriptor
//   StepExecutor       step_executor.h    step inputs, decode CUDA graphs, sampling, lookahead
//   FusedDecodeTuner   fused_decode_tuner.h  the load-time choice and check of the batch-1..4 path
// This file composes them: creation (weights, activations, a profiling step that measures the
// activation peak and tunes the matmuls and the fused path), the memory plan (the KV budget the
// device's planner leaves this runner under --gpu-memory-utilization), the KV cache's allocation,
// and the ModelRunner interface.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/cuda/cuda_model.h"
#include "engine/backend/cuda/cuda_runner_factory.h"
#include "engine/backend/cuda/device_context.h"
#include "engine/backend/cuda/kv_cache.h"
#include "engine/backend/cuda/step_executor.h"
#include "engine/runtime/memory_planner.h"
#include "engine/runtime/model_runner.h"

namespace lathe::cuda {

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
  int64_t vocab_size() const override { return model_->config().vocab_size; }
  std::shared_ptr<DeviceContext> device_context() const override { return ctx_; }
  bool verifies_draft_tokens() const override { return true; }

  // For tools and tests.
  const StepTimes& last_step_times() const { return executor_->times(); }
  // Predicted steps that the next input matched (hits) or did not (misses, each a dropped step).
  int64_t lookahead_hits() const { return executor_->lookahead_hits(); }
  int64_t lookahead_misses() const { return executor_->lookahead_misses(); }
  // The device mask cache's slots (constrained decoding): hits, uploads, overflows.
  const MaskSlotTable& mask_slots() const { return executor_->mask_slots(); }
  // Profiling: steps run with CUDA events between phases; phase_ms() accumulates GPU time per
  // phase over the profiled steps.
  void set_profiling(bool on) { executor_->set_profiling(on); }
  const std::array<double, static_cast<size_t>(Phase::kCount)>& phase_ms() const {
    return executor_->profiler().phase_ms();
  }
  int32_t profiled_steps() const { return executor_->profiler().steps(); }
  void reset_profile() { executor_->profiler().reset(); }
  const std::vector<LinearTiming>& linear_timings() const { return model_->linear().timings(); }
  std::vector<int32_t> graph_buckets(int32_t query_len = 1) const {
    return executor_->graph_buckets(query_len);
  }
  // One entry per M in [1, kDecodeGemvMaxM] (empty when the fused path is off or does not fit).
  const std::vector<FusedDecodeChoice>& fused_decode_choices() const { return fused_report_; }
  bool uses_decode_attention() const { return model_->uses_decode_attention(); }
  const ForwardPlan& plan() const { return model_->plan(); }
  std::string plan_summary() const;

 private:
  CudaModelRunner() = default;
  Status init(const LoadedModel& model, const CudaRunnerOptions& options);
  // The largest step run once on a one-block cache (every lazy allocation of cuBLASLt, FlashInfer
  // and the kernels happens), then the matmul autotune and the fused path's choice and check.
  Status profile_step();
  Status tune();
  Status plan_memory();
  // The actionable error when one max_model_len sequence needs more KV cache than kv_budget.
  Status check_one_sequence_fits(int64_t kv_budget) const;

  CudaRunnerOptions options_;
  std::shared_ptr<CudaDeviceContext> ctx_;
  std::unique_ptr<CudaModel> model_;
  CudaKvCache kv_;
  std::unique_ptr<StepExecutor> executor_;
  std::vector<FusedDecodeChoice> fused_report_;
  DeviceMemoryInfo memory_;
  int32_t max_model_len_ = 0;
  int32_t block_size_ = 16;
  // What this runner holds in the device's planner: its load (weights, activations, workspaces,
  // measured) and its KV cache.
  MemoryReservation load_reservation_, kv_reservation_;
  int64_t free_before_load_ = 0;
};

}  // namespace lathe::cuda
