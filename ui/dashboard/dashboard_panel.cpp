#include "ui/dashboard/dashboard_panel.h"

#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLocale>
#include <QScrollArea>
#include <QToolButton>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

#include "ui/bridge/engine_bridge.h"
#include "ui/dashboard/chart_card.h"

namespace lathe::ui {

namespace {

// Distinct on light and dark backgrounds.
const QColor kBlue(0x3b, 0x82, 0xf6);
const QColor kOrange(0xf5, 0x9e, 0x0b);
const QColor kGreen(0x10, 0xb9, 0x81);
const QColor kRed(0xef, 0x44, 0x44);
const QColor kPurple(0x8b, 0x5c, 0xf6);
const QColor kGray(0x8a, 0x94, 0xa3);

using H = MetricsHistory;

QString num(double v, int decimals = 0) {
  return std::isnan(v) ? QStringLiteral("—") : QLocale().toString(v, 'f', decimals);
}

// Two-point horizontal line across the window (percentile markers).
QVector<QPointF> hline(double from, double to, double y) {
  if (std::isnan(y)) return {};
  return {QPointF(from, y), QPointF(to, y)};
}

}  // namespace

DashboardPanel::DashboardPanel(EngineBridge* bridge, QWidget* parent) : QWidget(parent) {
  auto* root = new QVBoxLayout(this);
  auto* bar = new QHBoxLayout;
  m_pauseButton = new QToolButton;
  m_pauseButton->setObjectName(QStringLiteral("pauseButton"));
  m_pauseButton->setCheckable(true);
  m_pauseButton->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
  m_pauseButton->setIcon(QIcon(QStringLiteral(":/icons/pause.svg")));
  m_pauseButton->setText(tr("Pause"));
  m_pauseButton->setShortcut(QKeySequence(Qt::Key_Space));
  m_pauseButton->setToolTip(tr("Freeze the charts (Space). Recording continues."));
  auto* clearButton = new QToolButton;
  clearButton->setText(tr("Clear"));
  clearButton->setIcon(QIcon(QStringLiteral(":/icons/delete.svg")));
  clearButton->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
  m_status = new QLabel(tr("No model loaded: load one on the Models page to see the engine work."));
  m_status->setObjectName(QStringLiteral("dashboardStatus"));
  bar->addWidget(m_pauseButton);
  bar->addWidget(clearButton);
  bar->addSpacing(12);
  bar->addWidget(m_status, 1);
  root->addLayout(bar);

  auto* scroll = new QScrollArea;
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  auto* content = new QWidget;
  auto* grid = new QGridLayout(content);
  grid->setContentsMargins(0, 0, 0, 0);
  scroll->setWidget(content);
  root->addWidget(scroll, 1);

  buildCharts();
  const QList<ChartCard*> cards = charts();
  for (int i = 0; i < cards.size(); ++i) grid->addWidget(cards[i], i / 2, i % 2);
  for (int r = 0; r < (cards.size() + 1) / 2; ++r) grid->setRowMinimumHeight(r, 250);

  connect(m_pauseButton, &QToolButton::toggled, this, &DashboardPanel::setPaused);
  connect(clearButton, &QToolButton::clicked, this, &DashboardPanel::clear);
  if (bridge != nullptr) {
    connect(bridge, &EngineBridge::metricsSampled, this, &DashboardPanel::addSample);
    connect(bridge, &EngineBridge::modelLoaded, this, &DashboardPanel::clear);
  }
}

void DashboardPanel::buildCharts() {
  using S = ChartCard::Style;
  using A = ChartCard::Axis;
  m_kv = new ChartCard(
      tr("KV cache"),
      tr("Blocks of the paged KV cache. Used blocks hold running sequences; cached blocks are free "
         "but still hold a prompt prefix a new request can reuse; free blocks are empty. When used "
         "blocks reach the total, the newest sequence is preempted."));
  m_kv->addSeries(tr("used"), kBlue);
  m_kv->addSeries(tr("cached"), kGreen);
  // Free blocks usually dwarf the others: they are in the summary line and the CSV, not drawn.
  m_kv->addSeries(tr("free"), kGray, S::kHidden);
  m_kv->addSeries(tr("occupancy %"), kOrange, S::kDashed, A::kRight);
  m_kv->setAxisLabels(tr("blocks"), tr("% used"));
  m_kv->setFixedValueRange(A::kRight, 0.0, 105.0);

  m_slots = new ChartCard(
      tr("Batch slots"),
      tr("Sequences in the running batch and in the waiting queue. Running is capped by "
         "max-num-seqs (dashed) and by free KV blocks; a growing queue means the engine is "
         "saturated."));
  m_slots->addSeries(tr("running"), kBlue, S::kStep);
  m_slots->addSeries(tr("waiting"), kOrange, S::kStep);
  m_slots->addSeries(tr("max-num-seqs"), kGray, S::kDashed);
  m_slots->setAxisLabels(tr("sequences"));

  m_ttft = new ChartCard(
      tr("Time to first token"),
      tr("One dot per request: time from arrival to its first token (queueing plus prefill). The "
         "lines are the median (p50) and 95th percentile (p95) over the window."));
  m_ttft->addSeries(tr("TTFT"), kBlue, S::kPoints);
  m_ttft->addSeries(tr("p50"), kGreen, S::kDashed);
  m_ttft->addSeries(tr("p95"), kRed, S::kDashed);
  m_ttft->setAxisLabels(tr("ms"));

  m_itl = new ChartCard(
      tr("Inter-token latency"),
      tr("Average gap between consecutive tokens of a stream, per 100 ms poll. It grows with the "
         "batch size and when long prefills share a step with decodes."));
  m_itl->addSeries(tr("mean ITL"), kPurple);
  m_itl->setAxisLabels(tr("ms"));

  m_throughput = new ChartCard(
      tr("Throughput"),
      tr("Tokens per second over a 1 s sliding window: prompt tokens computed (prefill, chunked or "
         "not) and tokens generated (decode), across all requests."));
  m_throughput->addSeries(tr("prompt tok/s"), kOrange);
  m_throughput->addSeries(tr("generation tok/s"), kBlue);
  m_throughput->setAxisLabels(tr("tokens/s"));

  m_prefix = new ChartCard(
      tr("Prefix cache hit rate"),
      tr("Share of prompt tokens whose KV was found in the prefix cache instead of being computed. "
         "Requests that share a system prompt or a conversation history push it up."));
  m_prefix->addSeries(tr("last 10 s"), kGreen);
  m_prefix->addSeries(tr("since load"), kGray, S::kDashed);
  m_prefix->setAxisLabels(tr("% of prompt tokens"));
  m_prefix->setFixedValueRange(A::kLeft, 0.0, 105.0);

  m_preemptions = new ChartCard(
      tr("Preemptions"),
      tr("Running sequences evicted because the KV cache ran out of blocks; they are recomputed "
         "later. Growth here means max-num-seqs × max-model-len is too large for the cache."));
  m_preemptions->addSeries(tr("preemptions"), kRed, S::kStep);
  m_preemptions->setAxisLabels(tr("total"));
}

QList<ChartCard*> DashboardPanel::charts() const {
  return {m_kv, m_slots, m_ttft, m_itl, m_throughput, m_prefix, m_preemptions};
}

ChartCard* DashboardPanel::chart(const QString& title) const {
  for (ChartCard* c : charts())
    if (c->title() == title) return c;
  return nullptr;
}

void DashboardPanel::addSample(const MetricsSample& sample) {
  m_history.append(sample);
  if (!m_paused) refresh();
}

void DashboardPanel::setPaused(bool paused) {
  m_paused = paused;
  if (m_pauseButton->isChecked() != paused) m_pauseButton->setChecked(paused);
  m_pauseButton->setText(paused ? tr("Resume") : tr("Pause"));
  m_pauseButton->setIcon(
      QIcon(paused ? QStringLiteral(":/icons/start.svg") : QStringLiteral(":/icons/pause.svg")));
  if (!paused) refresh();
}

void DashboardPanel::clear() {
  m_history.clear();
  refresh();
}

void DashboardPanel::refresh() {
  // The window grows from the first sample until it spans windowSec(), then rolls; at least
  // kMinSpanSec so the first seconds are not stretched across the whole chart.
  constexpr double kMinSpanSec = 30.0;
  const double first = m_history.firstTime();
  const double to = std::max(m_history.latestTime(), first + kMinSpanSec);
  const double from = std::max(first, to - m_history.windowSec());
  m_kv->setSeries(0, m_history.points(H::kKvUsedBlocks));
  m_kv->setSeries(1, m_history.points(H::kKvCachedBlocks));
  m_kv->setSeries(2, m_history.points(H::kKvFreeBlocks));
  m_kv->setSeries(3, m_history.points(H::kKvUsagePercent));
  m_slots->setSeries(0, m_history.points(H::kRunning));
  m_slots->setSeries(1, m_history.points(H::kWaiting));
  m_slots->setSeries(2, m_history.points(H::kMaxNumSeqs));
  const double p50 = m_history.ttftPercentileMs(50), p95 = m_history.ttftPercentileMs(95);
  m_ttft->setSeries(0, m_history.points(H::kTtftMs));
  m_ttft->setSeries(1, hline(from, to, p50));
  m_ttft->setSeries(2, hline(from, to, p95));
  m_itl->setSeries(0, m_history.points(H::kItlMs));
  m_throughput->setSeries(0, m_history.points(H::kPromptTokensPerSec));
  m_throughput->setSeries(1, m_history.points(H::kGenerationTokensPerSec));
  m_prefix->setSeries(0, m_history.points(H::kPrefixHitRateWindow));
  m_prefix->setSeries(1, m_history.points(H::kPrefixHitRateTotal));
  m_preemptions->setSeries(0, m_history.points(H::kPreemptions));
  for (ChartCard* c : charts()) c->setTimeRange(from, to);
  updateSummaries(p50, p95);
  if (isVisible())
    for (ChartCard* c : charts()) c->replot();
}

void DashboardPanel::updateSummaries(double ttftP50Ms, double ttftP95Ms) {
  if (m_history.isEmpty()) {
    for (ChartCard* c : charts()) c->setSummary(QString());
    return;
  }
  const MetricsSample& x = m_history.latest();
  m_kv->setSummary(tr("%1 % used · %2 used / %3 cached / %4 free of %5 blocks × %6 tokens")
                       .arg(num(x.kvUsagePercent, 1), num(x.kvUsedBlocks), num(x.kvCachedBlocks),
                            num(x.kvFreeBlocks), num(x.kvTotalBlocks), num(x.blockSize)));
  m_slots->setSummary(tr("%1 running · %2 waiting · %3 slots")
                          .arg(num(x.numRunning), num(x.numWaiting), num(x.maxNumSeqs)));
  m_ttft->setSummary(
      tr("p50 %1 ms · p95 %2 ms · %3 requests in window")
          .arg(num(ttftP50Ms, 1), num(ttftP95Ms, 1), num(m_history.size(H::kTtftMs))));
  m_itl->setSummary(tr("%1 ms now").arg(num(m_history.last(H::kItlMs), 1)));
  m_throughput->setSummary(
      tr("prompt %1 tok/s · generation %2 tok/s")
          .arg(num(x.promptTokensPerSec, 1), num(x.generationTokensPerSec, 1)));
  m_prefix->setSummary(tr("%1 % since load (%2 of %3 prompt tokens)")
                           .arg(num(m_history.last(H::kPrefixHitRateTotal), 1),
                                num(x.prefixCacheHits), num(x.prefixCacheQueries)));
  m_preemptions->setSummary(tr("%1 since load").arg(num(x.numPreemptions)));
  m_status->setText(tr("Last 5 minutes · %1 samples · %2 requests finished%3")
                        .arg(num(m_history.totalSamples()), num(x.requestsFinished),
                             m_paused ? tr(" · paused") : QString()));
}

}  // namespace lathe::ui
