#include "ui/compare/compare_export.h"

#include <QBuffer>
#include <QFileInfo>
#include <QSaveFile>

#include "ui/compare/compare_report.h"
#include "ui/compare/compare_results.h"

namespace lathe::ui {

QVector<ExportFile> compareExportFiles(const CompareRun& run, const QString& path,
                                       CompareMetric current, QSize chartSize, QString* error) {
  const QString suffix = QFileInfo(path).suffix().toLower();
  if (suffix == QLatin1String("csv")) return {{path, compareToCsv(run.variants), {}}};
  if (suffix == QLatin1String("json")) return {{path, compareToJson(run), {}}};
  if (suffix == QLatin1String("png"))
    return {{path, {}, renderCompareChart(run.spec.concurrency, run.variants, current, chartSize)}};
  if (suffix == QLatin1String("md")) {
    QVector<ExportFile> files;
    const QVector<CompareReportChart> charts = compareReportCharts(path);
    const QString dir = QFileInfo(path).absolutePath();
    for (const CompareReportChart& c : charts)
      files.push_back({dir + QLatin1Char('/') + c.fileName,
                       {},
                       renderCompareChart(run.spec.concurrency, run.variants, c.metric,
                                          kCompareReportChartSize)});
    files.push_back({path, compareToMarkdown(run, charts).toUtf8(), {}});
    return files;
  }
  if (error)
    *error = QObject::tr(
                 "Cannot export to %1: choose a name ending in .csv, .json, .png (the chart) or "
                 ".md (a report with every chart).")
                 .arg(QFileInfo(path).fileName());
  return {};
}

QString writeExportFiles(const QVector<ExportFile>& files) {
  for (const ExportFile& f : files) {
    QByteArray bytes = f.bytes;
    if (bytes.isEmpty() && !f.image.isNull()) {
      QBuffer buffer(&bytes);
      buffer.open(QIODevice::WriteOnly);
      if (!f.image.save(&buffer, "PNG"))
        return QObject::tr("Cannot write %1: the chart could not be encoded as PNG").arg(f.path);
    }
    QSaveFile file(f.path);
    if (!file.open(QIODevice::WriteOnly) || file.write(bytes) != bytes.size() || !file.commit())
      return QObject::tr("Cannot write %1: %2").arg(f.path, file.errorString());
  }
  return {};
}

}  // namespace lathe::ui
