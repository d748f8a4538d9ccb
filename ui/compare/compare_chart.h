// The Compare tab's chart: one series per variant over the concurrency levels of the serving sweep,
// for one metric (output tokens/s, TTFT or ITL p50/p99). The panel draws it on screen and the
// exports draw the same chart off screen, so a PNG shows what the tab shows.
#pragma once

#include <QImage>
#include <QSize>
#include <QString>
#include <QVector>

#include "ui/bridge/quantize_types.h"

class QCustomPlot;

namespace lathe::ui {

enum class CompareMetric { kOutputThroughput, kTtftP50, kTtftP99, kItlP50, kItlP99 };
inline constexpr int kCompareMetricCount = 5;

QString compareMetricTitle(CompareMetric metric);  // "Output tokens/s", "TTFT p50 (ms)", …
QString compareMetricSlug(CompareMetric metric);   // for file names: "output-tokens-per-s", …
double compareMetricOf(const ComparePoint& point, CompareMetric metric);

// Axes, legend and ticker of an empty comparison chart (log x axis with a tick at each level).
void setupComparePlot(QCustomPlot* plot);
// Replaces the plot's series with one per variant (colors by position; a variant without sweep
// points has an empty series that the legend leaves out) and replots. Ticks at `levels`; the y
// axis from 0 to 110% of the largest value.
void plotCompareMetric(QCustomPlot* plot, const QVector<int>& levels,
                       const QVector<CompareVariant>& variants, CompareMetric metric);
// The same chart drawn off screen into an image of `size` pixels on a white background. GUI
// thread only (QCustomPlot is a widget); the image may then go to any thread.
QImage renderCompareChart(const QVector<int>& levels, const QVector<CompareVariant>& variants,
                          CompareMetric metric, QSize size);

}  // namespace lathe::ui
