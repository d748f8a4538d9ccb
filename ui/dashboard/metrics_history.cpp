#include "ui/dashboard/metrics_history.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace lathe::ui {

namespace {
constexpr double kHitRateWindowSec = 10.0;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
}  // namespace

MetricsHistory::MetricsHistory(double windowSec) : m_windowSec(windowSec) {}

void MetricsHistory::clear() {
  for (auto& s : m_series) s.clear();
  m_counterWindow.clear();
  m_havePrevious = false;
  m_samples = 0;
  m_latestTime = 0.0;
  m_latest = MetricsSample{};
}

void MetricsHistory::push(Series s, double t, double v) {
  m_series[s].emplace_back(t, v);
}

void MetricsHistory::append(const MetricsSample& x) {
  // A clock going backwards means a new engine (reload): start over rather than draw loops.
  if (m_samples > 0 && x.timeSec < m_latestTime) clear();
  const double t = x.timeSec;
  push(kKvUsedBlocks, t, x.kvUsedBlocks);
  push(kKvCachedBlocks, t, x.kvCachedBlocks);
  push(kKvFreeBlocks, t, x.kvFreeBlocks);
  push(kKvUsagePercent, t, x.kvUsagePercent);
  push(kRunning, t, x.numRunning);
  push(kWaiting, t, x.numWaiting);
  push(kMaxNumSeqs, t, x.maxNumSeqs);
  for (const auto& [when, ms] : x.newTtft) push(kTtftMs, when, ms);

  // Mean ITL over the interval since the previous poll; a gap when no token was produced.
  if (m_havePrevious) {
    const qint64 dn = x.itlCount - m_prevItlCount;
    const double ds = x.itlSumSec - m_prevItlSum;
    push(kItlMs, t, dn > 0 ? 1000.0 * ds / static_cast<double>(dn) : kNaN);
  }
  m_prevItlCount = x.itlCount;
  m_prevItlSum = x.itlSumSec;
  m_havePrevious = true;

  push(kPromptTokensPerSec, t, x.promptTokensPerSec);
  push(kGenerationTokensPerSec, t, x.generationTokensPerSec);

  m_counterWindow.push_back({t, x.prefixCacheQueries, x.prefixCacheHits});
  while (m_counterWindow.size() > 1 && m_counterWindow.front().t < t - kHitRateWindowSec)
    m_counterWindow.pop_front();
  const CounterPoint& old = m_counterWindow.front();
  const qint64 dq = x.prefixCacheQueries - old.queries;
  const qint64 dh = x.prefixCacheHits - old.hits;
  push(kPrefixHitRateWindow, t, dq > 0 ? 100.0 * static_cast<double>(dh) / dq : kNaN);
  push(kPrefixHitRateTotal, t,
       x.prefixCacheQueries > 0 ? 100.0 * static_cast<double>(x.prefixCacheHits) /
                                      static_cast<double>(x.prefixCacheQueries)
                                : kNaN);
  push(kPreemptions, t, static_cast<double>(x.numPreemptions));

  m_latest = x;
  m_latestTime = t;
  ++m_samples;
  prune();
}

void MetricsHistory::prune() {
  const double cutoff = m_latestTime - m_windowSec;
  for (auto& s : m_series)
    while (!s.empty() && s.front().x() < cutoff) s.pop_front();
}

double MetricsHistory::firstTime() const {
  const auto& s = m_series[kKvUsedBlocks];  // every poll adds a point here
  return s.empty() ? 0.0 : s.front().x();
}

QVector<QPointF> MetricsHistory::points(Series series) const {
  const auto& s = m_series[series];
  return QVector<QPointF>(s.begin(), s.end());
}

double MetricsHistory::last(Series series) const {
  const auto& s = m_series[series];
  return s.empty() ? kNaN : s.back().y();
}

double MetricsHistory::ttftPercentileMs(double p) const {
  const auto& s = m_series[kTtftMs];
  if (s.empty()) return kNaN;
  std::vector<double> v;
  v.reserve(s.size());
  for (const QPointF& pt : s) v.push_back(pt.y());
  std::sort(v.begin(), v.end());
  // Nearest rank: the smallest value with at least p% of the points at or below it.
  const double rank = std::ceil(std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(v.size()));
  const size_t i = rank < 1.0 ? 0 : static_cast<size_t>(rank) - 1;
  return v[std::min(i, v.size() - 1)];
}

const char* MetricsHistory::seriesName(Series series) {
  switch (series) {
    case kKvUsedBlocks:
      return "kv_used_blocks";
    case kKvCachedBlocks:
      return "kv_cached_blocks";
    case kKvFreeBlocks:
      return "kv_free_blocks";
    case kKvUsagePercent:
      return "kv_usage_percent";
    case kRunning:
      return "running";
    case kWaiting:
      return "waiting";
    case kMaxNumSeqs:
      return "max_num_seqs";
    case kTtftMs:
      return "ttft_ms";
    case kItlMs:
      return "itl_ms";
    case kPromptTokensPerSec:
      return "prompt_tokens_per_s";
    case kGenerationTokensPerSec:
      return "generation_tokens_per_s";
    case kPrefixHitRateWindow:
      return "prefix_hit_rate_10s_percent";
    case kPrefixHitRateTotal:
      return "prefix_hit_rate_total_percent";
    case kPreemptions:
      return "preemptions_total";
    case kSeriesCount:
      break;
  }
  return "unknown";
}

}  // namespace lathe::ui
