#include "ui/compare/compare_chart.h"

#include <qcustomplot.h>

#include <algorithm>
#include <cmath>
#include <iterator>

namespace lathe::ui {

namespace {

// One color per variant (at most 4), readable on light and dark backgrounds.
const QColor kSeriesColors[] = {QColor(0x25, 0x63, 0xeb), QColor(0xdc, 0x26, 0x26),
                                QColor(0x16, 0xa3, 0x4a), QColor(0xd9, 0x77, 0x06)};

}  // namespace

QString compareMetricTitle(CompareMetric metric) {
  switch (metric) {
    case CompareMetric::kOutputThroughput:
      return QObject::tr("Output tokens/s");
    case CompareMetric::kTtftP50:
      return QObject::tr("TTFT p50 (ms)");
    case CompareMetric::kTtftP99:
      return QObject::tr("TTFT p99 (ms)");
    case CompareMetric::kItlP50:
      return QObject::tr("ITL p50 (ms)");
    case CompareMetric::kItlP99:
      return QObject::tr("ITL p99 (ms)");
  }
  return {};
}

QString compareMetricSlug(CompareMetric metric) {
  switch (metric) {
    case CompareMetric::kOutputThroughput:
      return QStringLiteral("output-tokens-per-s");
    case CompareMetric::kTtftP50:
      return QStringLiteral("ttft-p50");
    case CompareMetric::kTtftP99:
      return QStringLiteral("ttft-p99");
    case CompareMetric::kItlP50:
      return QStringLiteral("itl-p50");
    case CompareMetric::kItlP99:
      return QStringLiteral("itl-p99");
  }
  return {};
}

double compareMetricOf(const ComparePoint& p, CompareMetric metric) {
  switch (metric) {
    case CompareMetric::kOutputThroughput:
      return p.outputTokensPerSec;
    case CompareMetric::kTtftP50:
      return p.ttftP50Ms;
    case CompareMetric::kTtftP99:
      return p.ttftP99Ms;
    case CompareMetric::kItlP50:
      return p.itlP50Ms;
    case CompareMetric::kItlP99:
      return p.itlP99Ms;
  }
  return 0.0;
}

void setupComparePlot(QCustomPlot* plot) {
  plot->xAxis->setLabel(QObject::tr("concurrency (requests in flight)"));
  plot->xAxis->setScaleType(QCPAxis::stLogarithmic);
  plot->xAxis->setTicker(QSharedPointer<QCPAxisTickerText>(new QCPAxisTickerText));
  plot->legend->setVisible(true);
  // Top left: the lowest levels have the lowest throughput, so the curves rarely pass there.
  plot->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignLeft);
}

void plotCompareMetric(QCustomPlot* plot, const QVector<int>& levels,
                       const QVector<CompareVariant>& variants, CompareMetric metric) {
  plot->clearGraphs();
  double maxY = 0.0;
  int maxX = 1;
  for (int i = 0; i < variants.size(); ++i) {
    QCPGraph* g = plot->addGraph();
    g->setName(variants[i].name);
    const QColor color = kSeriesColors[i % std::size(kSeriesColors)];
    g->setPen(QPen(color, 2));
    g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, color, color, 6));
    if (variants[i].sweep.isEmpty()) g->removeFromLegend();  // nothing drawn: not listed
    for (const ComparePoint& p : variants[i].sweep) {
      const double y = compareMetricOf(p, metric);
      g->addData(p.concurrency, y);
      if (std::isfinite(y)) maxY = std::max(maxY, y);
      maxX = std::max(maxX, p.concurrency);
    }
  }
  // Ticks at the measured levels (a log axis spreads 1, 4, 16, 64, 128, 300 evenly).
  auto ticker = qSharedPointerCast<QCPAxisTickerText>(plot->xAxis->ticker());
  ticker->clear();
  for (int level : levels) ticker->addTick(level, QString::number(level));
  plot->yAxis->setLabel(compareMetricTitle(metric));
  plot->xAxis->setRange(0.8, maxX * 1.25);
  plot->yAxis->setRange(0, maxY > 0 ? maxY * 1.1 : 1);
  plot->replot();
}

QImage renderCompareChart(const QVector<int>& levels, const QVector<CompareVariant>& variants,
                          CompareMetric metric, QSize size) {
  QCustomPlot plot;  // never shown: only drawn into the image
  plot.resize(size);
  plot.setBackground(Qt::white);
  setupComparePlot(&plot);
  plotCompareMetric(&plot, levels, variants, metric);
  QImage image(size, QImage::Format_ARGB32_Premultiplied);
  image.fill(Qt::white);
  QCPPainter painter(&image);
  plot.toPainter(&painter, size.width(), size.height());
  painter.end();
  return image;
}

}  // namespace lathe::ui
