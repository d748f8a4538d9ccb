#include "ui/quantize/measured_figures.h"

#include <QFileInfo>
#include <QObject>

namespace lathe::ui {
namespace {

bool sameScheme(const QuantCandidate& c, const QuantOutputRecord& r) {
  return c.scheme == r.scheme && (c.scheme != QLatin1String("rtn") || c.bits == r.bits);
}

QString canonical(const QString& path) {
  const QString c = QFileInfo(path).canonicalFilePath();
  return c.isEmpty() ? QFileInfo(path).absoluteFilePath() : c;
}

}  // namespace

QString measuredQualityText(const QualityReport& q) {
  return QObject::tr("KLD %1, top-1 %2%")
      .arg(q.kldMean, 0, 'f', 4)
      .arg(q.top1Agreement * 100.0, 0, 'f', 1);
}

void applyMeasuredFigures(QVector<QuantCandidate>* candidates, const QString& modelPath,
                          const QString& deviceLabel, const QVector<QuantOutputRecord>& outputs,
                          const QVector<CompareRun>& runs) {
  const QString model = canonical(modelPath);
  for (QuantCandidate& c : *candidates) {
    bool haveSpeed = false, haveQuality = false;
    for (const QuantOutputRecord& r : outputs) {
      if (canonical(r.model) != model || !sameScheme(c, r)) continue;
      if (!haveQuality && r.quality.measured) {
        c.quality = measuredQualityText(r.quality);
        c.qualitySource = QualitySource::kMeasured;
        c.qualityCitation =
            QObject::tr("lathe eval of %1 on %2")
                .arg(QFileInfo(r.output).fileName(), QFileInfo(r.quality.text).fileName());
        haveQuality = true;
      }
      const QString output = canonical(r.output);
      for (const CompareRun& run : runs) {
        if (haveSpeed && haveQuality) break;
        const bool referenceIsModel =
            !run.variants.isEmpty() && canonical(run.variants.front().path) == model;
        for (int i = 0; i < run.variants.size(); ++i) {
          const CompareVariant& v = run.variants[i];
          if (!v.error.isEmpty() || canonical(v.path) != output) continue;
          if (!haveSpeed && v.batch1TokensPerSec > 0.0 && !deviceLabel.isEmpty() &&
              v.device.startsWith(deviceLabel)) {
            c.measuredTokensPerSecond = v.batch1TokensPerSec;
            c.speedSource =
                QObject::tr("measured by the Compare tab on %1, %2")
                    .arg(v.device,
                         run.finished.toLocalTime().toString(QStringLiteral("yyyy-MM-dd HH:mm")));
            haveSpeed = true;
          }
          if (!haveQuality && i > 0 && referenceIsModel && v.quality.measured) {
            c.quality = measuredQualityText(v.quality);
            c.qualitySource = QualitySource::kMeasured;
            c.qualityCitation =
                QObject::tr("the Compare tab against %1").arg(QFileInfo(modelPath).fileName());
            haveQuality = true;
          }
        }
      }
      if (haveSpeed && haveQuality) break;
    }
  }
}

}  // namespace lathe::ui
