#include "engine/quant/quant_device.h"

#include <charconv>

#include "engine/runtime/cuda_plugin.h"

namespace lathe {
namespace {

// The CUDA CalibOps on `index`, or why not (the plugin's words).
Result<std::unique_ptr<CalibOps>> open_cuda(int32_t index) {
  std::string why;
  if (!cuda_backend::usable(index, &why)) return unsupported(why);
  return cuda_backend::create_calib_ops(index);
}

}  // namespace

Result<QuantDevice> parse_quant_device(const std::string& text) {
  QuantDevice d;
  d.text = text;
  if (text == "auto") {
    d.kind = QuantDeviceKind::kAuto;
    return d;
  }
  if (text == "cpu") {
    d.kind = QuantDeviceKind::kCpu;
    return d;
  }
  if (text == "cuda") {
    d.kind = QuantDeviceKind::kCuda;
    return d;
  }
  if (text.rfind("cuda:", 0) == 0 && text.size() > 5) {
    const char* b = text.data() + 5;
    const char* e = text.data() + text.size();
    int32_t n = -1;
    const auto [end, ec] = std::from_chars(b, e, n);
    if (ec == std::errc() && end == e && n >= 0) {
      d.kind = QuantDeviceKind::kCuda;
      d.index = n;
      return d;
    }
  }
  return invalid_argument(
      "--device must be auto, cpu, cuda or cuda:N (N a CUDA device number, 0 "
      "for the first), got '" +
      text + "'");
}

Result<QuantDeviceChoice> open_quant_device(const QuantDevice& device) {
  QuantDeviceChoice c;
  switch (device.kind) {
    case QuantDeviceKind::kCpu:
      c.ops = make_cpu_calib_ops();
      return c;
    case QuantDeviceKind::kCuda: {
      Result<std::unique_ptr<CalibOps>> ops = open_cuda(device.index);
      if (!ops.is_ok())
        return Status(
            ops.status().code() == ErrorCode::kResourceExhausted ? ErrorCode::kResourceExhausted
                                                                 : ErrorCode::kUnsupported,
            "--device " + device.text + ": " + ops.status().message() + "; use --device cpu");
      c.ops = std::move(ops).value();
      c.gpu = true;
      return c;
    }
    case QuantDeviceKind::kAuto: {
      Result<std::unique_ptr<CalibOps>> ops = open_cuda(0);
      if (ops.is_ok()) {
        c.ops = std::move(ops).value();
        c.gpu = true;
        c.reason = "--device auto: a usable GPU";
        return c;
      }
      c.ops = make_cpu_calib_ops();
      c.reason = "--device auto: no usable GPU: " + ops.status().message();
      return c;
    }
  }
  return internal_error("open_quant_device: unknown device kind");
}

bool quant_device_falls_back(const QuantDevice& device, bool on_gpu, const Status& error) {
  return device.kind == QuantDeviceKind::kAuto && on_gpu &&
         error.code() == ErrorCode::kResourceExhausted;
}

}  // namespace lathe
