// Where a calibrated `lathe quantize` (gptq, awq) runs its heavy arithmetic (--device): the CPU's
// CalibOps or a CUDA GPU's, through the CUDA plugin (engine/runtime/cuda_plugin.h). The other
// schemes (rtn, fp8-*, int8-w8a16, GGUF types) quantize tensor by tensor on the host and take no
// device.
//
//   auto     CUDA device 0 when the plugin loads and the device is usable, else the CPU
//            (QuantDeviceChoice::reason says which, and why not the GPU);
//   cpu      the CPU (ThreadPool::global());
//   cuda     CUDA device 0; cuda:N device N. No usable device is an error (the plugin's reason).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/core/status.h"
#include "engine/quant/calib_ops.h"

namespace lathe {

enum class QuantDeviceKind { kAuto, kCpu, kCuda };

struct QuantDevice {
  QuantDeviceKind kind = QuantDeviceKind::kCpu;
  int32_t index = 0;  // kCuda: the CUDA device number
  std::string text;   // as the user wrote it (for messages)
};

// "auto", "cpu", "cuda" or "cuda:N" (N >= 0), case-sensitive. kInvalidArgument naming the value
// and the accepted ones.
Result<QuantDevice> parse_quant_device(const std::string& text);

// The CalibOps of a job, and what to tell the user about the choice.
struct QuantDeviceChoice {
  std::unique_ptr<CalibOps> ops;
  // kAuto: "--device auto: a usable GPU" or "--device auto: no usable GPU: <the plugin's
  // reason>"; empty for an explicit choice (taken as asked).
  std::string reason;
  bool gpu = false;  // ops are a GPU's
};

// Creates the CalibOps of `device`. kCpu never fails. kCuda: kUnsupported "--device cuda: <the
// plugin's reason>; use --device cpu" when the device is not usable or its CalibOps cannot be made.
// kAuto: the GPU's when device 0 is usable and its CalibOps are made, else the CPU's (never fails).
Result<QuantDeviceChoice> open_quant_device(const QuantDevice& device);

// Whether a job should go on with the CPU's CalibOps after `error`: only for `--device auto`, only
// when its ops are a GPU's (QuantDeviceChoice::gpu) and only for kResourceExhausted (the batch's
// activations do not fit the GPU). An explicit device keeps the error.
bool quant_device_falls_back(const QuantDevice& device, bool on_gpu, const Status& error);

}  // namespace lathe
