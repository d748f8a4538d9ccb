#include "engine/backend/cuda/step_profiler.h"

#include "engine/backend/cuda/cuda_common.h"

namespace lathe::cuda {

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::kEmbedding:
      return "embedding";
    case Phase::kNorm:
      return "rmsnorm";
    case Phase::kQkvGemm:
      return "qkv_proj";
    case Phase::kRopeKv:
      return "rope_kv_write";
    case Phase::kAttention:
      return "attention";
    case Phase::kOGemm:
      return "o_proj";
    case Phase::kGateUpGemm:
      return "gate_up_proj";
    case Phase::kSwiglu:
      return "swiglu";
    case Phase::kDownGemm:
      return "down_proj";
    case Phase::kLmHead:
      return "lm_head";
    case Phase::kSampler:
      return "sampler";
    case Phase::kCount:
      break;
  }
  return "?";
}

StepProfiler::~StepProfiler() {
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
}

Status StepProfiler::prepare(int64_t num_layers) {
  if (!events_.empty()) return Status();
  const size_t n = static_cast<size_t>(num_layers) * 9 + 8;
  events_.resize(n, nullptr);
  phase_of_.resize(n, Phase::kCount);
  for (cudaEvent_t& ev : events_) LATHE_CUDA_TRY(cudaEventCreate(&ev));
  return Status();
}

Status StepProfiler::start(cudaStream_t stream, bool capturing) {
  if (events_.empty()) return internal_error("profiling: prepare() first");
  stream_ = stream;
  capturing_ = capturing;
  used_ = 0;
  recording_ = true;
  return record(Phase::kCount);
}

Status StepProfiler::record(Phase phase) {
  if (used_ >= events_.size()) return internal_error("profiling: out of events");
  // In a capture, an external record node, so that the replayed graph records the event itself.
  LATHE_CUDA_TRY(cudaEventRecordWithFlags(
      events_[used_], stream_, capturing_ ? cudaEventRecordExternal : cudaEventRecordDefault));
  phase_of_[used_] = phase;
  ++used_;
  return Status();
}

Status StepProfiler::mark(Phase phase) {
  if (!recording_) return Status();
  return record(phase);
}

Status StepProfiler::mark_once(Phase phase, cudaStream_t stream) {
  stream_ = stream;
  capturing_ = false;
  return record(phase);
}

Status StepProfiler::collect(size_t num_events) {
  const size_t n = num_events > 0 ? num_events : used_;
  for (size_t i = 1; i < n; ++i) {
    float ms = 0.f;
    LATHE_CUDA_TRY(cudaEventElapsedTime(&ms, events_[i - 1], events_[i]));
    ms_[static_cast<size_t>(phase_of_[i])] += ms;
  }
  ++steps_;
  return Status();
}

void StepProfiler::reset() {
  ms_.fill(0.0);
  steps_ = 0;
}

}  // namespace lathe::cuda
