// Conversions between the engine's structs and the Qt-side structs of bridge_types.h. Internal to
// the bridge: this is the only header of ui/ (with engine_worker.h) that includes engine headers.
#pragma once

#include "engine/model/model_report.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/metrics.h"
#include "engine/server/request_log.h"
#include "ui/bridge/bridge_types.h"
#include "ui/settings/load_settings.h"

namespace lathe::ui {

// What the bridge keeps of an inspected model to plan its memory later.
struct ModelFacts {
  ModelConfig config;
  int64_t storedWeightBytes = 0;  // as stored in the files; 0 without weights
};

ModelSummary summarizeReport(const ModelReport& report);
ModelFacts factsFromReport(const ModelReport& report);

// The memory plan for `facts` under `settings` on `device` (see bridge_types.h). On the CPU it
// checks against the machine's RAM with an fp32 KV cache, as `lathe inspect` does; on a GPU
// against total memory × gpu-memory-utilization with a 16-bit KV cache. loadedWeightBytes > 0
// replaces the weights as they would sit in memory (the quantization wizard's candidates).
MemoryPlan planMemoryFor(const ModelFacts& facts, const LoadSettings& settings,
                         const DeviceInfo& device, qint64 loadedWeightBytes = 0);

// The detected device: the first CUDA GPU when the CUDA backend plugin loads and a GPU is usable,
// else the CPU with the machine's RAM.
DeviceInfo detectDevice();

// The engine configuration for `path` under `settings`. cpuThreads 0 = all cores but one.
EngineConfig toEngineConfig(const QString& path, const LoadSettings& settings, int cpuThreads);

// One metrics poll. Points since the previous poll come from the snapshot's series.
MetricsSample toMetricsSample(const MetricsSnapshot& snapshot);

GenerationStats statsFromEvent(const StreamEvent& event);
lathe::ui::RequestLogEntry toLogEntry(const lathe::RequestLogEntry& entry);

}  // namespace lathe::ui
