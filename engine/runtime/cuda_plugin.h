// The CUDA backend, reached through its plugin (liblathe_cuda.so, engine/backend/cuda/
// cuda_plugin_api.h). The plugin is dlopened on first use, once per process, and never unloaded;
// Lathe itself links no CUDA library, so it starts everywhere and runs on the CPU when the plugin
// or NVIDIA's CUDA runtime is missing. Only this loader and the plugin know whether CUDA was built;
// runner_factory and the GUI ask here.
//
// Where the plugin is looked for, in order:
//   1. $LATHE_CUDA_PLUGIN, a path to the file (when set and not empty, the only candidate);
//   2. the folder of liblathe_engine.so itself (the build tree's lib/, the installed private lib
//      folder, a GPU bundle's lib/);
//   3. the install layout next to the executable: <bin>/../<libdir>/lathe/.
// The first candidate that exists is loaded; if it fails to load, that is the error (no silent
// fallback to another file).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/cuda/cuda_plugin_api.h"
#include "engine/core/status.h"
#include "engine/runtime/model_runner.h"

namespace lathe::cuda_backend {

enum class PluginProblem {
  kNone,          // loaded
  kNotBuilt,      // this build of Lathe has no CUDA backend (LATHE_CUDA=OFF)
  kNotInstalled,  // no plugin file where it is looked for (the lathe-cuda package is missing)
  kCannotLoad,    // the file exists but does not load (a CUDA library missing, wrong version, ...)
};

struct PluginStatus {
  const CudaPluginApi* api = nullptr;  // set when problem == kNone
  PluginProblem problem = PluginProblem::kNone;
  std::string path;  // the file loaded or tried; empty when none was found
  // When not loaded: why, and what to do (without "--device" advice; callers add it).
  std::string message;
};

// Whether this build compiled the CUDA backend.
bool built();

// The plugin, found and loaded on the first call (thread-safe); later calls return the same status.
const PluginStatus& plugin();

// Device queries through the plugin. Without a loaded plugin, usable() is false with the plugin's
// message as `why`, and the others return that message as their error / text.
bool usable(int32_t device, std::string* why = nullptr);
std::string description(int32_t device);
Result<CudaDeviceProperties> properties(int32_t device);
// The CUDA model runner (cuda_runner_factory.h's create_cuda_model_runner, in the plugin).
Result<std::unique_ptr<ModelRunner>> create_model_runner(const LoadedModel& model,
                                                         const CudaRunnerOptions& options);
// The CUDA implementation of a calibrated quantization's arithmetic (engine/quant/calib_ops.h) on
// `device`; without a loaded plugin, kUnsupported with the plugin's message.
Result<std::unique_ptr<CalibOps>> create_calib_ops(int32_t device);
// The backend's A/B switches set in the environment (cuda_switches.h); defaults without a plugin.
CudaSwitches switches_from_environment(std::vector<std::string>* warnings);

// The building blocks of plugin(), for tests and diagnostics.
// Candidate files in search order (see above); `env_override` stands for $LATHE_CUDA_PLUGIN.
std::vector<std::string> search_paths(const char* env_override);
// dlopens `path` (RTLD_NOW | RTLD_LOCAL; never closed) and checks its entry point and ABI. Does not
// consult or change plugin()'s cached status.
PluginStatus load_file(const std::string& path);
// The user's message for a failed dlopen of `path` with dlerror() text `dl_error`: names a missing
// library ("libcublasLt.so.13 is missing") and, for a CUDA one, the NVIDIA packages to install.
std::string describe_load_error(const std::string& path, const std::string& dl_error);

}  // namespace lathe::cuda_backend
