// The Compare tab's exports, by the chosen file's extension:
//   .csv   one row per variant × concurrency level (compareToCsv);
//   .json  the whole run (compareToJson: the saved-run format, reopened by Open run…);
//   .png   the chart on screen (the chosen metric), at the chart's size;
//   .md    the Markdown report (compareToMarkdown) and, next to it, one PNG per metric
//          ("<report>-<metric>.png") that it embeds, each kCompareReportChartSize: a report's
//          charts should not depend on how tall the window happened to be.
// Preparing an export draws the charts (GUI thread, a few milliseconds each); writing it (PNG
// encoding, disk) is writeExportFiles, which the panel runs on its I/O thread.
#pragma once

#include <QByteArray>
#include <QImage>
#include <QSize>
#include <QString>
#include <QVector>

#include "ui/compare/compare_chart.h"
#include "ui/compare/compare_run.h"

namespace lathe::ui {

inline constexpr QSize kCompareReportChartSize{960, 540};

// One file to write: `bytes`, or `image` encoded as PNG when bytes is empty.
struct ExportFile {
  QString path;
  QByteArray bytes;
  QImage image;
};

// The files an export to `path` writes, in writing order (a report's charts before the report,
// so its links never point at missing files). Empty with *error for an extension it does not
// know. `current`/`chartSize`: the chart on screen (what .png writes). GUI thread.
QVector<ExportFile> compareExportFiles(const CompareRun& run, const QString& path,
                                       CompareMetric current, QSize chartSize, QString* error);

// Writes each file atomically (QSaveFile), in order, stopping at the first failure. Returns empty,
// or what failed ("Cannot write /x/report.md: No space left on device"). Any thread.
QString writeExportFiles(const QVector<ExportFile>& files);

}  // namespace lathe::ui
