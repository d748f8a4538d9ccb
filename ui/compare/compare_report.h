// The Compare tab's Markdown report: a title, when and on what the run was measured, what was
// asked (models, concurrency levels, lengths, the quality text), one table of each variant's
// memory, speed at batch 1 and quality against the first, one table of the serving sweep (every
// variant × level: throughput, TTFT and ITL percentiles), the verdict paragraph, and the charts,
// which are PNG files written next to the report (one per metric) and embedded by relative link.
//
// One PNG per metric rather than a grid: the metrics have different units and scales, each chart
// stays readable at the size it was drawn, and each can be pasted into a slide or an issue on
// its own; the report is where they are seen together.
#pragma once

#include <QString>
#include <QVector>

#include "ui/compare/compare_chart.h"
#include "ui/compare/compare_run.h"

namespace lathe::ui {

struct CompareReportChart {
  CompareMetric metric = CompareMetric::kOutputThroughput;
  QString fileName;  // relative to the report's folder
};

// The charts of a report written at reportPath: "<report stem>-<metric slug>.png", every metric.
QVector<CompareReportChart> compareReportCharts(const QString& reportPath);

// The report (CommonMark with GitHub tables). Names and paths are escaped so that a "|" or "*"
// in a file name cannot break a table or the emphasis; links are percent-encoded.
QString compareToMarkdown(const CompareRun& run, const QVector<CompareReportChart>& charts);

}  // namespace lathe::ui
