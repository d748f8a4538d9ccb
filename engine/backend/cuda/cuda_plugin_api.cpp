// liblathe_cuda.so's entry point: the table of cuda_plugin_api.h over cuda_runner_factory.h.
#include "engine/backend/cuda/cuda_plugin_api.h"

#include <cuda_runtime.h>

#include "engine/core/strings.h"

#ifndef LATHE_BUILD_VERSION
#error "LATHE_BUILD_VERSION must name the Lathe version (engine/backend/cuda/CMakeLists.txt)"
#endif

namespace lathe {
namespace {

bool device_usable(int32_t device, std::string* why) {
  return cuda_device_usable(device, why);
}

std::string device_description(int32_t device) {
  return cuda_device_description(device);
}

const CudaPluginApi kApi = {
    .abi_version = kCudaPluginAbiVersion,
    .struct_size = sizeof(CudaPluginApi),
    .lathe_version = LATHE_BUILD_VERSION,
    .device_usable = &device_usable,
    .device_description = &device_description,
    .device_properties = &cuda_device_properties,
    .create_model_runner = &create_cuda_model_runner,
    .switches_from_environment = &cuda_switches_from_environment,
    .create_calib_ops = &create_cuda_calib_ops,
};

}  // namespace
}  // namespace lathe

extern "C" __attribute__((visibility("default"))) const lathe::CudaPluginApi*
lathe_cuda_plugin_api() {
  return &lathe::kApi;
}
