#include "ui/bridge/quality_eval.h"

#include <QThread>

#include <algorithm>

namespace lathe::ui {

QualityReport measureQuality(const QualityRequest& request,
                             const std::function<void(const EvalProgress&)>& progress,
                             const std::atomic<bool>* cancel) {
  QualityReport q;
  q.text = request.text;
  EvalConfig c;
  c.model = request.model.toStdString();
  c.reference = request.reference.toStdString();
  c.text_file = request.text.toStdString();
  c.context = request.context;
  c.max_windows = request.windows;
  c.device.device = DeviceKind::kCpu;  // beside a model the GPU may hold; the CLI's --device cpu
  c.device.num_threads = std::max(1, QThread::idealThreadCount() - 1);
  auto report = evaluate(c, progress, cancel);
  if (!report.is_ok()) {
    q.error = QString::fromStdString(report.status().message());
    return q;
  }
  const EvalReport& r = report.value();
  q.measured = true;
  q.scoredPositions = r.scored;
  q.windows = r.windows;
  q.context = r.context;
  q.perplexity = r.perplexity;
  q.referencePerplexity = r.reference_perplexity;
  q.kldMean = r.kld.mean;
  q.kldP99 = r.kld.p99;
  q.top1Agreement = r.top1_agreement;
  q.seconds = r.seconds;
  return q;
}

}  // namespace lathe::ui
