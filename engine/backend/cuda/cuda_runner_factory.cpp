#include "engine/backend/cuda/cuda_runner_factory.h"

#include <cuda_runtime.h>

#include "engine/backend/cuda/cuda_model_runner.h"
#include "engine/core/strings.h"

namespace lathe {

Result<std::unique_ptr<ModelRunner>> create_cuda_model_runner(const LoadedModel& model,
                                                              const CudaRunnerOptions& options) {
  LATHE_ASSIGN_OR_RETURN(std::unique_ptr<cuda::CudaModelRunner> runner,
                         cuda::CudaModelRunner::create(model, options));
  return std::unique_ptr<ModelRunner>(std::move(runner));
}

bool cuda_device_available(std::string* why) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    if (why != nullptr) {
      *why = err == cudaErrorInsufficientDriver || err == cudaErrorNoDevice
                 ? strformat("no CUDA driver or device (%s)", cudaGetErrorName(err))
                 : strformat("the CUDA runtime cannot use a GPU (%s: %s)", cudaGetErrorName(err),
                             cudaGetErrorString(err));
    }
    return false;
  }
  if (count == 0) {
    if (why != nullptr) *why = "no CUDA device";
    return false;
  }
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, d) == cudaSuccess && p.major >= 8) return true;
  }
  if (why != nullptr) *why = "no CUDA device of compute capability 8.0 (Ampere) or newer";
  return false;
}

namespace {

// cuda_device_usable's checks, leaving the device's properties in *p.
bool usable_device(int32_t device, cudaDeviceProp* p, std::string* why) {
  if (!cuda_device_available(why)) return false;
  int count = 0;
  cudaGetDeviceCount(&count);
  if (device < 0 || device >= count) {
    if (why != nullptr)
      *why = strformat("CUDA device %d does not exist (%d devices)", device, count);
    return false;
  }
  const cudaError_t err = cudaGetDeviceProperties(p, device);
  if (err != cudaSuccess) {
    cudaGetLastError();
    if (why != nullptr) *why = strformat("CUDA device %d: %s", device, cudaGetErrorString(err));
    return false;
  }
  if (p->major < 8) {
    if (why != nullptr)
      *why = strformat("%s has compute capability %d.%d; Lathe needs 8.0 (Ampere) or newer",
                       p->name, p->major, p->minor);
    return false;
  }
  return true;
}

}  // namespace

bool cuda_device_usable(int32_t device, std::string* why) {
  cudaDeviceProp p{};
  return usable_device(device, &p, why);
}

bool cuda_device_properties(int32_t device, CudaDeviceProperties* out, std::string* why) {
  cudaDeviceProp p{};
  if (!usable_device(device, &p, why)) return false;
  out->name = p.name;
  out->total_bytes = static_cast<int64_t>(p.totalGlobalMem);
  out->major = p.major;
  out->minor = p.minor;
  out->multiprocessors = p.multiProcessorCount;
  return true;
}

std::string cuda_device_description(int32_t device) {
  std::string why;
  if (!cuda_device_available(&why)) return why;
  cudaDeviceProp p{};
  const cudaError_t err = cudaGetDeviceProperties(&p, device);
  if (err != cudaSuccess) return strformat("CUDA device %d: %s", device, cudaGetErrorString(err));
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  return strformat("%s (%s, compute %d.%d, %d SMs, driver %d.%d, runtime %d.%d)", p.name,
                   format_bytes(static_cast<double>(p.totalGlobalMem)).c_str(), p.major, p.minor,
                   p.multiProcessorCount, driver / 1000, (driver % 1000) / 10, runtime / 1000,
                   (runtime % 1000) / 10);
}

}  // namespace lathe
