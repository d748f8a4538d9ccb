#include "engine/runtime/runner_factory.h"

#include <optional>

#include "engine/backend/cpu/cpu_runner_factory.h"
#include "engine/core/dtype.h"
#include "engine/core/log.h"
#include "engine/core/status_guard.h"
#include "engine/model/loaded_model.h"
#include "engine/runtime/cuda_plugin.h"

namespace lathe {

namespace {

using cuda_backend::PluginProblem;

Result<DeviceSelection> cpu_without_gpu(const DeviceConfig& config, const std::string& why,
                                        PluginProblem problem) {
  DeviceSelection sel;
  switch (problem) {
    case PluginProblem::kNotBuilt:
      if (config.device == DeviceKind::kCuda)
        return unsupported("--device cuda: " + why + "; use --device cpu or rebuild with CUDA");
      sel.notice = "device: cpu (" + why + ")";
      return sel;
    case PluginProblem::kNotInstalled:
      // A CPU-only installation is a choice, not a failure: a notice, not a warning.
      if (config.device == DeviceKind::kCuda)
        return unsupported("--device cuda: " + why + ", or use --device cpu");
      sel.notice = "device: cpu; " + why + " to run on an NVIDIA GPU";
      return sel;
    case PluginProblem::kCannotLoad:
    case PluginProblem::kNone:
      break;
  }
  if (config.device == DeviceKind::kCuda)
    return unsupported("--device cuda: no usable GPU (" + why + "); use --device cpu");
  sel.notice = "no usable GPU (" + why + "); running on the CPU";
  sel.is_fallback = true;
  return sel;
}

}  // namespace

Result<DeviceSelection> select_device(const DeviceConfig& config) {
  DeviceSelection sel;
  if (config.device == DeviceKind::kCpu) return sel;
  std::string why;
  if (cuda_backend::usable(config.cuda_device, &why)) {
    sel.device = DeviceKind::kCuda;
    return sel;
  }
  return cpu_without_gpu(config, why, cuda_backend::plugin().problem);
}

Result<std::unique_ptr<ModelRunner>> create_model_runner(const LoadedModel& model,
                                                         const EngineConfig& config,
                                                         DeviceKind device) {
  if (device == DeviceKind::kCuda) {
    CudaRunnerOptions o;
    o.device = config.device.cuda_device;
    if (config.device.dtype != "auto") {
      const std::optional<DType> dtype = parse_float_dtype(config.device.dtype);
      if (!dtype)
        return invalid_argument("--dtype must be auto, bf16 or f16, got '" + config.device.dtype +
                                "'");
      o.dtype = *dtype;
    }
    o.enforce_eager = config.device.enforce_eager;
    o.max_num_seqs = config.scheduler.max_num_seqs;
    o.max_num_batched_tokens = config.scheduler.max_num_batched_tokens;
    o.max_model_len = config.scheduler.max_model_len;
    o.block_size = config.cache.block_size;
    o.gpu_memory_utilization = config.cache.gpu_memory_utilization;
    if (config.speculative.enabled())
      o.num_speculative_tokens = config.speculative.num_speculative_tokens;
    std::vector<std::string> warnings;
    o.switches = cuda_backend::switches_from_environment(&warnings);
    for (const std::string& w : warnings) log_warning("CUDA: " + w);
    return call_catching("creating the CUDA runner",
                         [&]() { return cuda_backend::create_model_runner(model, o); });
  }
  CpuRunnerOptions o;
  o.num_threads = config.device.num_threads;
  return call_catching("creating the CPU runner",
                       [&]() { return create_cpu_model_runner(model, o); });
}

int64_t default_cpu_kv_cache_bytes() {
  return default_cpu_kv_budget_bytes();
}

}  // namespace lathe
