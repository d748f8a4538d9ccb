// The quality of a model against a reference on held-out text, as `lathe eval` measures it
// (engine/eval/evaluate.h): perplexities, mean and p99 KL divergence, top-1 agreement. Shared by
// the quantization wizard (a new model against its source) and the Compare tab (each variant
// against the first). Runs on the calling thread, on the CPU (the GPU may hold a loaded model);
// `cancel` stops it between chunks. Errors are in QualityReport::error.
#pragma once

#include <QString>

#include <atomic>
#include <functional>

#include "engine/eval/evaluate.h"
#include "ui/bridge/quantize_types.h"

namespace lathe::ui {

struct QualityRequest {
  QString model;
  QString reference;
  QString text;  // a plain-text file
  int context = 512;
  int windows = 8;  // at most
};

QualityReport measureQuality(const QualityRequest& request,
                             const std::function<void(const EvalProgress&)>& progress,
                             const std::atomic<bool>* cancel);

}  // namespace lathe::ui
