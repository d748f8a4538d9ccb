#include "ui/quantize/quant_output_log.h"

#include <QSettings>

#include <algorithm>

namespace lathe::ui {
namespace {

constexpr const char* kGroup = "quantizeOutputs";

}  // namespace

QVector<QuantOutputRecord> quantOutputs() {
  QSettings s;
  QVector<QuantOutputRecord> out;
  const int n = s.beginReadArray(QLatin1String(kGroup));
  for (int i = 0; i < n; ++i) {
    s.setArrayIndex(i);
    QuantOutputRecord r;
    r.model = s.value(QStringLiteral("model")).toString();
    r.scheme = s.value(QStringLiteral("scheme")).toString();
    r.bits = s.value(QStringLiteral("bits"), -1).toInt();
    r.output = s.value(QStringLiteral("output")).toString();
    QualityReport& q = r.quality;
    q.measured = s.value(QStringLiteral("measured"), false).toBool();
    q.text = s.value(QStringLiteral("text")).toString();
    q.kldMean = s.value(QStringLiteral("kldMean"), 0.0).toDouble();
    q.kldP99 = s.value(QStringLiteral("kldP99"), 0.0).toDouble();
    q.top1Agreement = s.value(QStringLiteral("top1"), 0.0).toDouble();
    q.perplexity = s.value(QStringLiteral("perplexity"), 0.0).toDouble();
    q.referencePerplexity = s.value(QStringLiteral("referencePerplexity"), 0.0).toDouble();
    if (!r.model.isEmpty() && !r.output.isEmpty()) out.push_back(r);
  }
  s.endArray();
  return out;
}

void recordQuantOutput(const QuantOutputRecord& r) {
  QVector<QuantOutputRecord> all = quantOutputs();
  all.erase(std::remove_if(all.begin(), all.end(),
                           [&](const QuantOutputRecord& o) { return o.output == r.output; }),
            all.end());
  all.prepend(r);
  if (all.size() > kMaxQuantOutputs) all.resize(kMaxQuantOutputs);
  QSettings s;
  s.remove(QLatin1String(kGroup));
  s.beginWriteArray(QLatin1String(kGroup), static_cast<int>(all.size()));
  for (int i = 0; i < all.size(); ++i) {
    s.setArrayIndex(i);
    const QuantOutputRecord& o = all[i];
    s.setValue(QStringLiteral("model"), o.model);
    s.setValue(QStringLiteral("scheme"), o.scheme);
    s.setValue(QStringLiteral("bits"), o.bits);
    s.setValue(QStringLiteral("output"), o.output);
    s.setValue(QStringLiteral("measured"), o.quality.measured);
    s.setValue(QStringLiteral("text"), o.quality.text);
    s.setValue(QStringLiteral("kldMean"), o.quality.kldMean);
    s.setValue(QStringLiteral("kldP99"), o.quality.kldP99);
    s.setValue(QStringLiteral("top1"), o.quality.top1Agreement);
    s.setValue(QStringLiteral("perplexity"), o.quality.perplexity);
    s.setValue(QStringLiteral("referencePerplexity"), o.quality.referencePerplexity);
  }
  s.endArray();
}

}  // namespace lathe::ui
