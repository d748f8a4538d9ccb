// CompareTask: measures 2-4 model variants one after another on the same device, off the GUI
// thread, for the Compare tab. For each variant it loads an engine (the Models page's load
// settings, a short max-model-len), runs the offline latency benchmark at batch 1 (decode
// tokens/s, end-to-end latency, TTFT and a prefill rate = prompt tokens / median TTFT), then
// starts the in-process OpenAI server on a free port and runs the load generator at every
// concurrency level (vLLM benchmark_serving's definitions: output tokens/s, TTFT and ITL
// percentiles). The engine is freed before the next variant loads.
//
// Cancel is checked between stages and levels, and stops the server, which aborts what is in
// flight: a sweep stops within one level's requests at most.
#pragma once

#include <QObject>
#include <QThreadPool>

#include <atomic>

#include "ui/bridge/quantize_types.h"
#include "ui/settings/load_settings.h"

namespace lathe::ui {

class CompareTask : public QObject {
  Q_OBJECT
 public:
  explicit CompareTask(QObject* parent = nullptr);
  ~CompareTask() override;  // cancels and waits

  // False while a comparison runs. Emits progress…, variantMeasured per variant (in order), then
  // finished exactly once.
  bool start(const CompareSpec& spec, const LoadSettings& settings);
  void cancel();
  bool isRunning() const { return m_running; }

 signals:
  void progress(const lathe::ui::CompareProgressInfo& info);
  void variantMeasured(int index, const lathe::ui::CompareVariant& variant);
  void finished(bool cancelled);

 private:
  void run(const CompareSpec& spec, const LoadSettings& settings);
  CompareVariant measure(const CompareSpec& spec, const LoadSettings& settings, int index);
  void report(const CompareSpec& spec, int variant, double withinVariant, const QString& stage);

  bool m_running = false;  // GUI thread
  std::atomic<bool> m_cancel{false};
  QThreadPool m_pool;
};

// Requests sent at one concurrency level: spec.promptsPerLevel, else 2 × level (at least 4).
int promptsForLevel(const CompareSpec& spec, int level);

}  // namespace lathe::ui
