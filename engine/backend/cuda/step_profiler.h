// The profiling mode of the CUDA runner: CUDA events between the phases of a step (recorded as
// graph nodes when the step is captured), and the GPU time accumulated per phase over the profiled
// steps. The forward pass calls mark(phase) after each phase; it records only while recording().
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/core/status.h"

namespace lathe::cuda {

// Phases of a step.
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

class StepProfiler {
 public:
  ~StepProfiler();

  // Events for the largest step: a start, 9 marks per layer, 4 more and the sampler.
  Status prepare(int64_t num_layers);
  // Starts a profiled step (records the start event); marks record until stop().
  Status start(cudaStream_t stream, bool capturing);
  void stop() { recording_ = false; }
  bool recording() const { return recording_; }
  // Records the end of `phase` on the started step's stream when recording.
  Status mark(Phase phase);
  // Records the end of `phase` on `stream` now, recording or not (a phase launched outside the
  // captured graph: the sampler), after the events of the step so far.
  Status mark_once(Phase phase, cudaStream_t stream);
  // Adds the last profiled step's phase times (events up to `num_events`, or all recorded).
  Status collect(size_t num_events = 0);
  size_t events_used() const { return used_; }
  void set_events_used(size_t n) { used_ = n; }

  void reset();
  const std::array<double, static_cast<size_t>(Phase::kCount)>& phase_ms() const { return ms_; }
  int32_t steps() const { return steps_; }

 private:
  Status record(Phase phase);

  cudaStream_t stream_ = nullptr;
  bool recording_ = false;
  bool capturing_ = false;  // inside a stream capture: events become external record nodes
  std::vector<cudaEvent_t> events_;
  std::vector<Phase> phase_of_;
  size_t used_ = 0;
  std::array<double, static_cast<size_t>(Phase::kCount)> ms_{};
  int32_t steps_ = 0;
};

}  // namespace lathe::cuda
