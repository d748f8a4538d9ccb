// StepExecutor's lookahead (step_executor.h): the predicted next decode step launched behind the
// current one, and the check of the next input against it.
#include <chrono>
#include <utility>

#include "engine/backend/cuda/step_executor.h"
#include "engine/backend/cuda/step_upload.h"
#include "engine/runtime/next_decode_input.h"

namespace lathe::cuda {

Status StepExecutor::launch_ahead(const ModelInput& in) {
  if (options_.lookahead_max_seqs <= 0 || !in.next_step_continues || profiling_ || !times_.graph ||
      in.num_seqs() > options_.lookahead_max_seqs)
    return Status();
  std::optional<ModelInput> next = predict_next_decode(in, limits_.block_size);
  if (!next) return Status();
  const int32_t bucket = bucket_for(next->num_seqs(), 1);
  const auto graph = graphs_.find(GraphKey{bucket, 1});
  if (bucket <= 0 || graph == graphs_.end() || !check_step(*next, limits_).is_ok()) return Status();
  // Constrained rows: their masks in the predicted step follow from the tokens this step samples,
  // so it is launched without its sampler (late-bound sampling rows, step_executor.h), and
  // without the stale masks in its upload.
  const bool late = has_constrained_rows(*next);
  // ahead_step_host_ has no copy in flight: the last one from it was this step's predecessor's
  // (taken, and waited for in the previous execute()) or a dropped prediction's (waited for).
  // Stream order: this step's graph, sampler and copies to the host are done with step_dev_ and
  // sampled_ before the predicted step's inputs overwrite them.
  LATHE_RETURN_IF_ERROR(upload_step(*next, limits_, bucket, true, ahead_step_host_, step_dev_,
                                    &ahead_.packed, stream_, 1,
                                    late ? MaskPacking::kLater : MaskPacking::kNow));
  // Token i of the predicted step is the token sampled for row i of this one (sample_seqs are
  // 0..S-1 in both).
  uint8_t* ids = step_dev_.as<uint8_t>() + ahead_.packed.layout.token_ids;
  LATHE_CUDA_TRY(cudaMemcpy2DAsync(ids, sizeof(int32_t), sampled_.get(), sizeof(DeviceSampledToken),
                                   sizeof(int32_t), static_cast<size_t>(next->num_seqs()),
                                   cudaMemcpyDeviceToDevice, stream_));
  LATHE_CUDA_TRY(cudaGraphLaunch(graph->second, stream_));
  if (!late) LATHE_RETURN_IF_ERROR(sample(ahead_.packed, ahead_sampled_host_, ahead_top_host_));
  // After the graph (late) or the sampler's copies: a dropped step is waited for up to here.
  LATHE_CUDA_TRY(cudaEventRecord(ahead_done_, stream_));
  ahead_.expected = std::move(*next);
  ahead_.late_sampling = late;
  ahead_.pending = true;
  return Status();
}

Result<bool> StepExecutor::take_ahead(const ModelInput& in) {
  if (!ahead_.pending) return false;
  const auto t0 = std::chrono::steady_clock::now();
  // A step launched without its sampler is `in` when its forward pass is `in`'s; it samples with
  // `in`'s rows (the masks the host computed from the tokens of the step before).
  const bool late = ahead_.late_sampling;
  if (late ? !same_forward(in, ahead_.expected) : !same_step(in, ahead_.expected)) {
    LATHE_RETURN_IF_ERROR(drop_ahead());
    return false;
  }
  ahead_.pending = false;
  ++lookahead_hits_;
  // The predicted step becomes the current one: its inputs, outputs and completion event.
  std::swap(step_host_, ahead_step_host_);
  std::swap(sampled_host_, ahead_sampled_host_);
  std::swap(top_host_, ahead_top_host_);
  std::swap(step_done_, ahead_done_);
  packed_ = ahead_.packed;
  times_ = StepTimes{};
  times_.graph = true;
  times_.bucket = packed_.num_seqs;
  if (late) {
    // Stream order: the predicted forward pass, then this input packed again with its masks (the
    // forward arrays equal: same_forward), the sampler and its copies, the completion event.
    LATHE_RETURN_IF_ERROR(upload_late_sampling(in, UploadShape{packed_.num_seqs, true, 1}));
    LATHE_RETURN_IF_ERROR(sample(packed_, sampled_host_, top_host_));
    LATHE_CUDA_TRY(cudaEventRecord(step_done_, stream_));
  }
  times_.prepare_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  return true;
}

Status StepExecutor::drop_ahead() {
  if (!ahead_.pending) return Status();
  ahead_.pending = false;
  ++lookahead_misses_;
  // Its K/V writes went to its sequences' next slots, inside blocks they held; whatever runs next
  // rewrites them before reading (model_io.h). Waiting frees its host buffers.
  LATHE_CUDA_TRY(cudaEventSynchronize(ahead_done_));
  return Status();
}

}  // namespace lathe::cuda
