// Device selection and model-runner creation: the one place that knows which backends exist.
// --device auto picks CUDA when the CUDA backend (the liblathe_cuda.so plugin, loaded by
// engine/runtime/cuda_plugin.h) loads and a GPU is usable, else the CPU with a notice the front-end
// shows (a warning when the plugin is installed but cannot load or finds no GPU); --device cuda
// without a usable GPU is an error saying why (plugin not built or not installed, a CUDA library
// missing, no driver or device).
#pragma once

#include <memory>
#include <string>

#include "engine/core/status.h"
#include "engine/runtime/engine_config.h"
#include "engine/runtime/model_runner.h"

namespace lathe {

struct LoadedModel;

struct DeviceSelection {
  DeviceKind device = DeviceKind::kCpu;  // kCpu or kCuda, never kAuto
  std::string notice;                    // set when auto chose the CPU: why (shown to the user)
  bool is_fallback = false;  // the CUDA backend is installed but unusable (a warning, not a notice)
};

Result<DeviceSelection> select_device(const DeviceConfig& config);

// Creates the runner for `device` (from select_device). `config` has its scheduler limits resolved
// (a GPU runner sizes activation workspaces from max_num_batched_tokens and max_num_seqs).
// `model` must outlive the runner.
Result<std::unique_ptr<ModelRunner>> create_model_runner(const LoadedModel& model,
                                                         const EngineConfig& config,
                                                         DeviceKind device);

// The KV budget on the CPU when --kv-cache-memory is not given: min(1 GiB, 25% of RAM).
int64_t default_cpu_kv_cache_bytes();

}  // namespace lathe
