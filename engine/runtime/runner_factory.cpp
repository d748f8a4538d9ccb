#include "engine/runtime/runner_factory.h"

#include <optional>

#include "engine/backend/cpu/cpu_runner_factory.h"
#include "engine/core/dtype.h"
#include "engine/model/loaded_model.h"

#ifdef LATHE_WITH_CUDA
#include "engine/backend/cuda/cuda_runner_factory.h"
#endif

namespace lathe {

Result<DeviceSelection> select_device(const DeviceConfig& config) {
  DeviceSelection sel;
  if (config.device == DeviceKind::kCpu) return sel;
#ifdef LATHE_WITH_CUDA
  std::string why;
  if (cuda_device_usable(config.cuda_device, &why)) {
    sel.device = DeviceKind::kCuda;
    return sel;
  }
  if (config.device == DeviceKind::kCuda)
    return unsupported("--device cuda: no usable GPU (" + why + "); use --device cpu");
  sel.notice = "no usable GPU (" + why + "); running on the CPU";
  sel.is_fallback = true;
#else
  if (config.device == DeviceKind::kCuda)
    return unsupported(
        "--device cuda: this build of Lathe has no CUDA backend (built with LATHE_CUDA=OFF); "
        "use --device cpu or rebuild with CUDA");
  sel.notice = "device: cpu (this build of Lathe has no CUDA backend)";
#endif
  return sel;
}

Result<std::unique_ptr<ModelRunner>> create_model_runner(const LoadedModel& model,
                                                         const EngineConfig& config,
                                                         DeviceKind device) {
  if (device == DeviceKind::kCuda) {
#ifdef LATHE_WITH_CUDA
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
    return create_cuda_model_runner(model, o);
#else
    return unsupported("this build of Lathe has no CUDA backend");
#endif
  }
  CpuRunnerOptions o;
  o.num_threads = config.device.num_threads;
  return create_cpu_model_runner(model, o);
}

int64_t default_cpu_kv_cache_bytes() {
  return default_cpu_kv_budget_bytes();
}

}  // namespace lathe
