// The live dashboard: seven charts fed by the engine's metrics snapshot (~10 polls/s through the
// EngineBridge), over a rolling 5-minute window that can be paused. Pausing freezes the view; the
// history keeps recording, so resuming shows everything that happened meanwhile.
#pragma once

#include <QWidget>

#include "ui/bridge/bridge_types.h"
#include "ui/dashboard/metrics_history.h"

class QLabel;
class QToolButton;

namespace lathe::ui {

class ChartCard;
class EngineBridge;

class DashboardPanel : public QWidget {
  Q_OBJECT
 public:
  // bridge: may be null (tests feed samples with addSample()). Not owned.
  explicit DashboardPanel(EngineBridge* bridge, QWidget* parent = nullptr);

  const MetricsHistory& history() const { return m_history; }
  QList<ChartCard*> charts() const;
  ChartCard* chart(const QString& title) const;  // by title, or null
  bool isPaused() const { return m_paused; }

 public slots:
  void addSample(const lathe::ui::MetricsSample& sample);
  void setPaused(bool paused);
  void clear();
  // Copies the history into the charts and replots (when visible). Called after each sample.
  void refresh();

 private:
  void buildCharts();
  void updateSummaries(double ttftP50Ms, double ttftP95Ms);

  MetricsHistory m_history;
  bool m_paused = false;
  QToolButton* m_pauseButton = nullptr;
  QLabel* m_status = nullptr;
  ChartCard* m_kv = nullptr;
  ChartCard* m_slots = nullptr;
  ChartCard* m_ttft = nullptr;
  ChartCard* m_itl = nullptr;
  ChartCard* m_throughput = nullptr;
  ChartCard* m_prefix = nullptr;
  ChartCard* m_preemptions = nullptr;
};

}  // namespace lathe::ui
