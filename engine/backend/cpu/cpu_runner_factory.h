// Creates the CPU model runner. The engine core includes only this header (no CPU op headers).
#pragma once

#include <cstdint>
#include <memory>

#include "engine/core/dtype.h"
#include "engine/core/status.h"
#include "engine/runtime/model_runner.h"
#include "engine/runtime/parallel.h"

namespace lathe {

struct LoadedModel;

struct CpuRunnerOptions {
  int32_t num_threads = 0;       // worker threads incl. the caller's; 0 = one per hardware thread
  DType kv_dtype = DType::kF32;  // KV-cache element type; the CPU backend supports f32 only
  uint64_t dummy_seed = 0;       // seed of the random weights for ModelFormat::kDummy
  ParallelConfig parallel;       // ranks (world size 1 only on the CPU today)
};

// The runner reads weights in place from `model` (memory-mapped files): `model` must outlive it.
// For ModelFormat::kDummy it creates seeded random weights of the config's shape (bf16, or f32 when
// the config says float32) with std 0.02 and unit norm weights. Errors name the tensor or option.
Result<std::unique_ptr<ModelRunner>> create_cpu_model_runner(const LoadedModel& model,
                                                             const CpuRunnerOptions& options);

// The KV budget the CPU backend offers when the user sets none: min(1 GiB, 25% of physical RAM).
int64_t default_cpu_kv_budget_bytes();

}  // namespace lathe
