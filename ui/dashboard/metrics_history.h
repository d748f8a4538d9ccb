// The dashboard's data: a rolling window (default 5 minutes) of series derived from MetricsSample
// polls. Pure data, no widgets: the charts copy from it on every refresh, so pausing the view loses
// nothing. Times are MetricsSample::timeSec; a NaN value is a gap (nothing happened in the
// interval, e.g. no tokens for inter-token latency).
#pragma once

#include <QPointF>
#include <QVector>

#include <deque>

#include "ui/bridge/bridge_types.h"

namespace lathe::ui {

class MetricsHistory {
 public:
  enum Series {
    kKvUsedBlocks,
    kKvCachedBlocks,
    kKvFreeBlocks,
    kKvUsagePercent,
    kRunning,
    kWaiting,
    kMaxNumSeqs,
    kTtftMs,  // one point per request (time of its first token, TTFT)
    kItlMs,   // mean inter-token latency over each poll interval
    kPromptTokensPerSec,
    kGenerationTokensPerSec,
    kPrefixHitRateWindow,  // % of prompt tokens found in the prefix cache over the last 10 s
    kPrefixHitRateTotal,   // % since the model was loaded
    kPreemptions,          // cumulative
    kSeriesCount
  };

  explicit MetricsHistory(double windowSec = 300.0);

  void append(const MetricsSample& sample);
  void clear();

  double windowSec() const { return m_windowSec; }
  bool isEmpty() const { return m_samples == 0; }
  double latestTime() const { return m_latestTime; }
  // Time of the oldest sample still in the window (0 when empty).
  double firstTime() const;
  const MetricsSample& latest() const { return m_latest; }
  qint64 totalSamples() const { return m_samples; }

  // The points of a series inside the window, oldest first.
  QVector<QPointF> points(Series series) const;
  int size(Series series) const { return static_cast<int>(m_series[series].size()); }
  // The newest value of a series (NaN when it has none).
  double last(Series series) const;

  // Percentile p in [0, 100] of the TTFT points in the window (nearest rank); NaN when empty.
  double ttftPercentileMs(double p) const;

  static const char* seriesName(Series series);  // CSV column name, e.g. "kv_used_blocks"

 private:
  void push(Series s, double t, double v);
  void prune();

  struct CounterPoint {
    double t;
    qint64 queries;
    qint64 hits;
  };

  double m_windowSec;
  double m_latestTime = 0.0;
  qint64 m_samples = 0;
  MetricsSample m_latest;
  bool m_havePrevious = false;
  double m_prevItlSum = 0.0;
  qint64 m_prevItlCount = 0;
  std::deque<CounterPoint> m_counterWindow;  // last 10 s of prefix-cache counters
  std::deque<QPointF> m_series[kSeriesCount];
};

}  // namespace lathe::ui
