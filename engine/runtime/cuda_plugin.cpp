#include "engine/runtime/cuda_plugin.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <system_error>

#include "engine/core/strings.h"

// Set by engine/runtime/CMakeLists.txt for this file only.
#ifndef LATHE_CUDA_PLUGIN_BUILT
#error "LATHE_CUDA_PLUGIN_BUILT must be 0 or 1"
#endif
#ifndef LATHE_BUILD_VERSION
#error "LATHE_BUILD_VERSION must name the Lathe version"
#endif
#ifndef LATHE_PLUGIN_DIR_FROM_BIN
#error "LATHE_PLUGIN_DIR_FROM_BIN must be the private lib folder relative to the bin folder"
#endif
#ifndef LATHE_CUDA_RUNTIME_ADVICE
#define LATHE_CUDA_RUNTIME_ADVICE "install NVIDIA's CUDA runtime and cuBLAS"
#endif

namespace lathe::cuda_backend {

namespace fs = std::filesystem;

namespace {

std::string parent_folder(const std::string& file) {
  return fs::path(file).parent_path().string();
}

// The folder of the object this function is in: liblathe_engine.so (or the executable when the
// engine is linked statically).
std::string engine_folder() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&engine_folder), &info) == 0 || info.dli_fname == nullptr)
    return {};
  std::error_code ec;
  const fs::path resolved = fs::canonical(info.dli_fname, ec);
  return ec ? parent_folder(info.dli_fname) : resolved.parent_path().string();
}

std::string executable_folder() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

// "libcublasLt.so.13" from "libcublasLt.so.13: cannot open shared object file: No such file or
// directory"; empty when dlerror() is about something else.
std::string missing_library(const std::string& dl_error) {
  const std::string marker = ": cannot open shared object file";
  const size_t at = dl_error.find(marker);
  if (at == std::string::npos) return {};
  const size_t start = dl_error.rfind(' ', at);
  return dl_error.substr(start == std::string::npos ? 0 : start + 1,
                         at - (start == std::string::npos ? 0 : start + 1));
}

bool is_cuda_library(const std::string& name) {
  for (const char* prefix : {"libcuda", "libcublas", "libcusolver", "libcusparse", "libnv"})
    if (starts_with(name, prefix)) return true;
  return false;
}

PluginStatus failure(PluginProblem problem, std::string path, std::string message) {
  PluginStatus s;
  s.problem = problem;
  s.path = std::move(path);
  s.message = std::move(message);
  return s;
}

PluginStatus find_and_load() {
  if (!LATHE_CUDA_PLUGIN_BUILT)
    return failure(PluginProblem::kNotBuilt, {},
                   "this build of Lathe has no CUDA backend: it was built with LATHE_CUDA=OFF");
  const char* env = std::getenv("LATHE_CUDA_PLUGIN");
  const std::vector<std::string> candidates = search_paths(env);
  std::error_code ec;
  for (const std::string& path : candidates)
    if (fs::exists(path, ec)) return load_file(path);
  if (env != nullptr && env[0] != '\0')
    return failure(PluginProblem::kCannotLoad, env,
                   "LATHE_CUDA_PLUGIN names " + std::string(env) +
                       ", which does not exist; point it at liblathe_cuda.so or unset it");
  std::string folders;
  for (const std::string& path : candidates)
    folders += (folders.empty() ? "" : " or ") + parent_folder(path);
  return failure(PluginProblem::kNotInstalled, {},
                 "the CUDA backend is not installed (no " + std::string(kCudaPluginFileName) +
                     " in " + folders + "); install the lathe-cuda package");
}

}  // namespace

bool built() {
  return LATHE_CUDA_PLUGIN_BUILT != 0;
}

std::vector<std::string> search_paths(const char* env_override) {
  if (env_override != nullptr && env_override[0] != '\0') return {env_override};
  std::vector<std::string> paths;
  auto add = [&paths](const fs::path& folder) {
    if (folder.empty()) return;
    const std::string file = (folder / kCudaPluginFileName).lexically_normal().string();
    for (const std::string& p : paths)
      if (p == file) return;
    paths.push_back(file);
  };
  add(engine_folder());
  const std::string exe = executable_folder();
  if (!exe.empty()) add(fs::path(exe) / LATHE_PLUGIN_DIR_FROM_BIN);
  return paths;
}

std::string describe_load_error(const std::string& path, const std::string& dl_error) {
  const std::string missing = missing_library(dl_error);
  if (!missing.empty() && missing != path && is_cuda_library(missing))
    return "the CUDA backend (" + path + ") cannot load: " + missing +
           " is missing; " LATHE_CUDA_RUNTIME_ADVICE;
  if (!missing.empty() && missing != path)
    return "the CUDA backend (" + path + ") cannot load: " + missing +
           " is missing; reinstall the lathe-cuda package";
  return "the CUDA backend (" + path + ") cannot load (" + dl_error +
         "); reinstall the lathe-cuda package of the same version as lathe (" LATHE_BUILD_VERSION
         ")";
}

PluginStatus load_file(const std::string& path) {
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return failure(PluginProblem::kCannotLoad, path,
                   describe_load_error(path, err != nullptr ? err : "unknown dlopen error"));
  }
  // From here on the handle stays open: a rejected plugin costs a little address space, and a
  // loaded one must outlive every runner it created.
  auto entry = reinterpret_cast<LatheCudaPluginApiFn>(dlsym(handle, kCudaPluginEntryPoint));
  if (entry == nullptr)
    return failure(PluginProblem::kCannotLoad, path,
                   path + " is not a Lathe CUDA backend (it has no " +
                       std::string(kCudaPluginEntryPoint) + "); reinstall the lathe-cuda package");
  const CudaPluginApi* api = entry();
  if (api == nullptr || api->abi_version != kCudaPluginAbiVersion ||
      api->struct_size != sizeof(CudaPluginApi) || api->lathe_version == nullptr ||
      std::string(api->lathe_version) != LATHE_BUILD_VERSION) {
    const std::string theirs =
        api == nullptr ? std::string("an unknown version")
                       : "Lathe " + std::string(api->lathe_version ? api->lathe_version : "?") +
                             " (plugin ABI " + std::to_string(api->abi_version) + ")";
    return failure(PluginProblem::kCannotLoad, path,
                   "the CUDA backend " + path + " was built for " + theirs +
                       ", this is Lathe " LATHE_BUILD_VERSION " (plugin ABI " +
                       std::to_string(kCudaPluginAbiVersion) +
                       "); install the lathe-cuda package of the same version as lathe");
  }
  PluginStatus s;
  s.api = api;
  s.path = path;
  return s;
}

const PluginStatus& plugin() {
  static std::once_flag once;
  static PluginStatus status;
  std::call_once(once, [] { status = find_and_load(); });
  return status;
}

bool usable(int32_t device, std::string* why) {
  const PluginStatus& p = plugin();
  if (p.api == nullptr) {
    if (why != nullptr) *why = p.message;
    return false;
  }
  return p.api->device_usable(device, why);
}

std::string description(int32_t device) {
  const PluginStatus& p = plugin();
  return p.api == nullptr ? p.message : p.api->device_description(device);
}

Result<CudaDeviceProperties> properties(int32_t device) {
  const PluginStatus& p = plugin();
  if (p.api == nullptr) return unsupported(p.message);
  CudaDeviceProperties props;
  std::string why;
  if (!p.api->device_properties(device, &props, &why)) return unsupported(why);
  return props;
}

Result<std::unique_ptr<ModelRunner>> create_model_runner(const LoadedModel& model,
                                                         const CudaRunnerOptions& options) {
  const PluginStatus& p = plugin();
  if (p.api == nullptr) return unsupported(p.message);
  return p.api->create_model_runner(model, options);
}

Result<std::unique_ptr<CalibOps>> create_calib_ops(int32_t device) {
  const PluginStatus& p = plugin();
  if (p.api == nullptr) return unsupported(p.message);
  return p.api->create_calib_ops(device);
}

CudaSwitches switches_from_environment(std::vector<std::string>* warnings) {
  const PluginStatus& p = plugin();
  if (p.api == nullptr) return CudaSwitches{};
  return p.api->switches_from_environment(warnings);
}

}  // namespace lathe::cuda_backend
