// A stand-in for liblathe_cuda.so in the plugin loader's tests, built without CUDA. Compile
// definitions make its variants: FAKE_ABI_VERSION (the ABI it claims), FAKE_LATHE_VERSION, and
// FAKE_NEEDS_RUNTIME (it then links fake_runtime.cpp's library, which the test leaves where the
// dynamic loader cannot find it, as a machine without NVIDIA's runtime would).
#include "engine/backend/cuda/cuda_plugin_api.h"

#ifdef FAKE_NEEDS_RUNTIME
extern "C" int lathe_fake_runtime_version();
#endif

namespace {

bool usable(int32_t device, std::string* why) {
#ifdef FAKE_NEEDS_RUNTIME
  if (lathe_fake_runtime_version() < 0) return false;
#endif
  if (why != nullptr) *why = "fake plugin: no device " + std::to_string(device);
  return false;
}

std::string description(int32_t device) {
  return "fake plugin device " + std::to_string(device);
}

bool properties(int32_t device, lathe::CudaDeviceProperties* out, std::string* why) {
  return usable(device, why);
}

lathe::Result<std::unique_ptr<lathe::ModelRunner>> create(const lathe::LoadedModel&,
                                                          const lathe::CudaRunnerOptions&) {
  return lathe::unsupported("fake plugin: no runner");
}

lathe::CudaSwitches switches(std::vector<std::string>*) {
  return {};
}

const lathe::CudaPluginApi kApi = {
    .abi_version = FAKE_ABI_VERSION,
    .struct_size = sizeof(lathe::CudaPluginApi),
    .lathe_version = FAKE_LATHE_VERSION,
    .device_usable = &usable,
    .device_description = &description,
    .device_properties = &properties,
    .create_model_runner = &create,
    .switches_from_environment = &switches,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const lathe::CudaPluginApi*
lathe_cuda_plugin_api() {
  return &kApi;
}
