// The Compare tab: pick 2-4 models (the first is the reference; the wizard's outputs are added to
// the list of offers automatically), set the serving sweep (concurrency levels, prompt and output
// lengths), and run them one at a time on the same device (CompareTask, off the GUI thread). A
// table and a QCustomPlot chart (one series per variant over concurrency: output tokens/s, TTFT or
// ITL p50/p99) fill as each variant finishes. Every run that finishes (not stopped) is saved
// (compare_run_store.h) and listed under Open run…, which shows a saved run again exactly as it
// was, without measuring. Export writes CSV, JSON, the chart as PNG, or a Markdown report with
// every chart (compare_export.h). File I/O (saving, opening, listing runs, writing exports) runs on
// the panel's own I/O thread; the GUI thread only draws.
#pragma once

#include <QThreadPool>
#include <QWidget>

#include <functional>

#include "ui/bridge/quantize_types.h"
#include "ui/compare/compare_chart.h"
#include "ui/compare/compare_run.h"
#include "ui/settings/load_settings.h"

class QComboBox;
class QCustomPlot;
class QLabel;
class QLineEdit;
class QListWidget;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTableView;
class QToolButton;

namespace lathe::ui {

class CompareResultsModel;
class CompareTask;
class MessageBanner;

class ComparePanel : public QWidget {
  Q_OBJECT
 public:
  using Metric = CompareMetric;
  static constexpr Metric kOutputThroughput = CompareMetric::kOutputThroughput;
  static constexpr Metric kTtftP50 = CompareMetric::kTtftP50;
  static constexpr Metric kTtftP99 = CompareMetric::kTtftP99;
  static constexpr Metric kItlP50 = CompareMetric::kItlP50;
  static constexpr Metric kItlP99 = CompareMetric::kItlP99;

  // settingsSource: called at Run for the load settings to measure with (the Models page's).
  // runsFolder: where finished runs are saved; empty = defaultCompareRunsFolder().
  ComparePanel(std::function<LoadSettings()> settingsSource, QWidget* parent = nullptr,
               const QString& runsFolder = QString());
  ~ComparePanel() override;  // waits for file writes in progress

  // Adds a model to the comparison (ignored when 4 are chosen or it is already there).
  void addModel(const QString& path);
  // Offers a model in the "add" list (the wizard's outputs, the open model).
  void offerModel(const QString& path);
  void setModels(const QStringList& paths);
  QStringList models() const;
  void setConcurrency(const QString& levels);  // "1, 4, 16"
  void setLengths(int inputLen, int outputLen);
  void setMetric(Metric metric);

  // Validates the choices (2-4 models, levels) and starts; false with the reason in the banner.
  bool run();
  void stop();
  bool isRunning() const;

  CompareResultsModel* results() const { return m_results; }
  QCustomPlot* plot() const { return m_plot; }
  MessageBanner* banner() const { return m_banner; }
  CompareTask* task() const { return m_task; }
  const CompareSpec& lastSpec() const { return m_spec; }
  QString verdict() const;
  QString runsFolder() const { return m_runsFolder; }
  // What the tab shows: the spec, the variants, the verdict and when the run ended.
  CompareRun currentRun() const;
  // Shows `run` as if it had just finished (table, chart, verdict, the spec's choices); no
  // measuring, nothing saved.
  void showRun(const CompareRun& run);

  // Starts an export by the extension of `path` (compare_export.h) and returns true; the files
  // are written in the background and exportFinished says how it went (an error also shows in the
  // banner). False with *error (and the banner) when there is nothing to export or the extension
  // is unknown.
  bool exportTo(const QString& path, QString* error = nullptr);
  // Reads a saved run in the background, then shows it (runOpened(path, true)) or shows why it
  // cannot (the banner; runOpened(path, false)).
  void openRun(const QString& path);
  // The recent saved runs as listed under Open run… (refreshed in the background).
  QVector<QPair<QString, QString>> recentRuns() const;  // (path, label), newest first

 signals:
  void comparisonFinished(bool cancelled);
  // A finished run was written to `path` (empty with the error in the banner when it could not be).
  void runSaved(const QString& path);
  void exportFinished(const QString& path, const QString& error);  // error empty on success
  void runOpened(const QString& path, bool ok);
  void recentRunsChanged();

 private:
  void updateChart();
  void updateButtons();
  void askExport();
  void askOpenRun();
  void saveRun();
  void refreshRecentRuns();
  void rebuildOpenMenu();

  std::function<LoadSettings()> m_settingsSource;
  QString m_runsFolder;
  QThreadPool m_io;  // one thread: saves, opens, listings and exports in the order asked
  CompareTask* m_task = nullptr;
  CompareSpec m_spec;
  QDateTime m_finished;  // when the shown run ended (invalid: none yet)
  QVector<QPair<QString, QString>> m_recent;
  CompareResultsModel* m_results = nullptr;
  MessageBanner* m_banner = nullptr;
  QListWidget* m_models = nullptr;
  QComboBox* m_offers = nullptr;
  QPushButton* m_add = nullptr;
  QPushButton* m_remove = nullptr;
  QLineEdit* m_levels = nullptr;
  QSpinBox* m_inputLen = nullptr;
  QSpinBox* m_outputLen = nullptr;
  QPushButton* m_run = nullptr;
  QPushButton* m_stop = nullptr;
  QPushButton* m_export = nullptr;
  QToolButton* m_open = nullptr;
  QProgressBar* m_progress = nullptr;
  QLabel* m_status = nullptr;
  QTableView* m_table = nullptr;
  QComboBox* m_metric = nullptr;
  QCustomPlot* m_plot = nullptr;
  QLabel* m_verdict = nullptr;
};

// "1, 4, 16" -> {1, 4, 16}; empty with *error on anything else (levels must be 1..4096).
QVector<int> parseConcurrencyLevels(const QString& text, QString* error);

}  // namespace lathe::ui
