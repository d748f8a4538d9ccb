// The CUDA backend as a loadable module: liblathe_cuda.so exports one C entry point,
// lathe_cuda_plugin_api(), returning the table below. The engine (liblathe_engine.so) never links
// the plugin or a CUDA library; engine/runtime/cuda_plugin.h dlopens it on first use, so Lathe
// starts and runs on the CPU where the plugin or NVIDIA's CUDA runtime is missing.
//
// Plain C++, no CUDA headers: the loader includes it. C++ types cross the boundary (the engine and
// the plugin are built together, by one toolchain, and shipped as one version); the loader refuses
// a plugin whose abi_version, struct_size or lathe_version differ from its own.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/cuda/cuda_calib_ops.h"
#include "engine/backend/cuda/cuda_runner_factory.h"
#include "engine/core/status.h"
#include "engine/runtime/model_runner.h"

namespace lathe {

struct LoadedModel;

// Bump when a member of CudaPluginApi or a type it passes (CudaRunnerOptions, CudaDeviceProperties,
// ModelRunner, LoadedModel, ...) changes in a way an older plugin would misread.
// 3: CudaRunnerOptions switches, context; 4: SamplingRow::constraint (masks the runner looks up),
// CudaRunnerOptions::mask_cache_slots and the mask switches; 5: create_calib_ops (CalibOps,
// engine/quant/calib_ops.h); 6: CalibOps on CalibTensors (activations in the plugin's memory).
inline constexpr uint32_t kCudaPluginAbiVersion = 6;
// The exported symbol (extern "C") and the file name the loader looks for.
inline constexpr const char* kCudaPluginEntryPoint = "lathe_cuda_plugin_api";
inline constexpr const char* kCudaPluginFileName = "liblathe_cuda.so";

// The plugin's functions. Every pointer is set; each is thread-safe as its namesake in
// cuda_runner_factory.h.
struct CudaPluginApi {
  uint32_t abi_version;       // kCudaPluginAbiVersion of the plugin's build
  uint32_t struct_size;       // sizeof(CudaPluginApi) of the plugin's build
  const char* lathe_version;  // the Lathe version the plugin was built for (PROJECT_VERSION)
  // Whether device ordinal `device` exists and is usable (driver, compute capability >= 8.0); when
  // not, `why` (if given) says why.
  bool (*device_usable)(int32_t device, std::string* why);
  // "NVIDIA H200 (139.8 GiB, compute 9.0, ...)", or why the device is not usable.
  std::string (*device_description)(int32_t device);
  // Fills `out` for a usable device; false with `why` otherwise.
  bool (*device_properties)(int32_t device, CudaDeviceProperties* out, std::string* why);
  // create_cuda_model_runner(): the runner's code lives in the plugin, so the plugin must stay
  // loaded while the runner exists (the loader never unloads it).
  Result<std::unique_ptr<ModelRunner>> (*create_model_runner)(const LoadedModel& model,
                                                              const CudaRunnerOptions& options);
  // cuda_switches_from_environment() (cuda_switches.h): the LATHE_CUDA_* switches set in the
  // environment, with a warning per value ignored.
  CudaSwitches (*switches_from_environment)(std::vector<std::string>* warnings);
  // create_cuda_calib_ops() (cuda_calib_ops.h): `lathe quantize`'s heavy arithmetic on `device`.
  Result<std::unique_ptr<CalibOps>> (*create_calib_ops)(int32_t device);
};

}  // namespace lathe

// The entry point: a pointer to a static table, valid for the life of the process.
extern "C" const lathe::CudaPluginApi* lathe_cuda_plugin_api();
using LatheCudaPluginApiFn = const lathe::CudaPluginApi* (*)();
