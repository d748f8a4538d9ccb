// The load-time choice and check of a CudaModel's fused batch-1..4 decode path
// (fused_decode_check.h says what is measured and why): per M, the fused kernels timed alone on
// layer 0's weights (their launch shapes, RoPE and LM-head options), then whole decode steps as
// CUDA graphs for every valid set of fused projections; the fastest set is checked layer by layer
// against the unfused path on a scratch KV cache of its own. The result is the model's choice table
// (CudaModel:: set_fused_choices) and a report per M.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "engine/backend/cuda/cuda_model.h"

namespace lathe::cuda {

class FusedDecodeTuner {
 public:
  // `limits`: the runner's step limits (the scratch cache replaces num_blocks); `timing_kv`: a
  // cache to point the timed RoPE/KV calls at (they write nothing: slots are -1); enforce_eager:
  // whole steps are timed as launched, not as graphs.
  FusedDecodeTuner(CudaModel& model, const StepLimits& limits, const CudaKvCache& timing_kv,
                   bool enforce_eager);

  // x_scratch / y_scratch: the linear autotune's scratch (x holds 0.01). Leaves the choices in the
  // model. An error turns the path off (unless forced, the caller decides).
  Status run(void* x_scratch, void* y_scratch);
  const std::vector<FusedDecodeChoice>& report() const { return report_; }

 private:
  Status tune(void* x_scratch, void* y_scratch);
  Status check();
  Status run_checks(int32_t context, int32_t blocks);
  // The one-token step of m sequences after `context` positions over the scratch cache's `blocks`.
  Result<ForwardStep> pack_check_step(int32_t m, int32_t context, int32_t blocks);
  Status choose_parts(FusedDecodeChoice* ch, int32_t context, int32_t blocks);
  // Whole decode steps' times in microseconds (graph replay unless eager), one per variant (null:
  // unfused): every variant is captured first, then timed in interleaved rounds, keeping each
  // one's fastest round, so that clock drift does not pick the winner.
  Result<std::vector<double>> time_steps(const ForwardStep& step,
                                         const std::vector<const FusedDecodeChoice*>& fused);
  Result<FusedDecodeCheck> check_at(const FusedDecodeChoice& ch, int32_t context, int32_t blocks,
                                    const DeviceBuffer& context_kv, const DeviceBuffer& rows);

  CudaModel& model_;
  StepLimits limits_;
  const CudaKvCache& timing_kv_;
  bool enforce_eager_;
  bool forced_;
  FusedDecodeTestHooks hooks_;
  CudaKvCache kv_;  // the check's scratch cache
  PinnedBuffer host_;
  DeviceBuffer dev_;
  PackedStep packed_;
  std::array<FusedDecodeChoice, kDecodeGemvMaxM + 1> choices_{};
  std::vector<FusedDecodeChoice> report_;
};

}  // namespace lathe::cuda
