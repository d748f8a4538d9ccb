// What several runners on one device share: the backend's streams, math-library handles and
// workspaces, and the device's memory planner (memory_planner.h). Opaque to the engine: a backend
// hands its context out (ModelRunner::device_context()) and takes it back in the options of the
// next runner it creates on that device (a draft model beside its target), which then runs on the
// same stream and plans its memory together with the first. Runners sharing a context are driven
// by one thread (the engine's); an independent engine on the same device creates its own context
// and still shares the device's planner.
#pragma once

#include <string>

namespace lathe {

class MemoryPlanner;

class DeviceContext {
 public:
  virtual ~DeviceContext() = default;
  virtual std::string describe() const = 0;  // "NVIDIA H200 (device 0)"
  virtual MemoryPlanner& memory_planner() = 0;
};

}  // namespace lathe
