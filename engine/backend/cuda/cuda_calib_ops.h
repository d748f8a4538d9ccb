// The CUDA implementation of CalibOps (engine/quant/calib_ops.h): `lathe quantize`'s calibration
// forward (its CalibTensors in device memory), Hessians and GPTQ on one GPU. Plain C++ (no CUDA
// headers): the plugin API table (cuda_plugin_api.h) names it. The implementation is
// cuda_calib_ops.cpp (what runs where, device memory) and cuda_calib_gptq.cpp.
#pragma once

#include <cstdint>
#include <memory>

#include "engine/core/status.h"
#include "engine/quant/calib_ops.h"

namespace lathe {

// CalibOps on CUDA device `device` (its own stream, cuBLAS and cuSOLVER handles). kUnsupported
// naming why when the device is not usable (cuda_device_usable).
Result<std::unique_ptr<CalibOps>> create_cuda_calib_ops(int32_t device);

}  // namespace lathe
