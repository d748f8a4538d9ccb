// The quantization wizard's numbers, from the quantization library itself: for every scheme
// `lathe quantize` runs, the output size the library plans (QuantizeJob's expected_bytes), the
// memory plan with those weights under the current load settings, and the roofline's batch-1
// decode ceiling with the device's memory bandwidth. Internal to the bridge (engine headers).
#pragma once

#include <QString>

#include "ui/bridge/bridge_types.h"
#include "ui/bridge/quantize_types.h"
#include "ui/settings/load_settings.h"

namespace lathe::ui {

// The device's bandwidth: a GPU's nominal figure from its name (0 when the GPU is not known), or
// the host's measured read bandwidth (measured once per process, ~0.1 s; call off the GUI thread).
BandwidthEstimate estimateBandwidth(const DeviceInfo& device);

// The candidate schemes for the model at `path` (blocking: opens the model's weights memory-mapped
// and plans every output; run it on a worker thread). Calibrated GPTQ/AWQ rows are present and
// disabled. On a model that cannot be read, `error` is set and the list is empty.
QuantCandidates planQuantCandidates(const QString& path, const LoadSettings& settings,
                                    const DeviceInfo& device, const BandwidthEstimate& bandwidth);

// The library's planned output bytes for one spec (QuantizeJob::prepare(...).expected_bytes()
// with a throw-away output name), or -1 with *error set. For tests and the output page.
qint64 plannedOutputBytes(const QuantizeSpec& spec, QString* error);

}  // namespace lathe::ui
