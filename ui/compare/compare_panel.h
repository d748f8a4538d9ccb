// The Compare tab: pick 2-4 models (the first is the reference; the wizard's outputs are added to
// the list of offers automatically), set the serving sweep (concurrency levels, prompt and output
// lengths), and run them one at a time on the same device (CompareTask, off the GUI thread). A
// table and a QCustomPlot chart (one series per variant over concurrency: output tokens/s, TTFT or
// ITL p50/p99) fill as each variant finishes; Export writes CSV or JSON.
#pragma once

#include <QWidget>

#include <functional>

#include "ui/bridge/quantize_types.h"
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

namespace lathe::ui {

class CompareResultsModel;
class CompareTask;
class MessageBanner;

class ComparePanel : public QWidget {
  Q_OBJECT
 public:
  enum Metric { kOutputThroughput, kTtftP50, kTtftP99, kItlP50, kItlP99 };

  // settingsSource: called at Run for the load settings to measure with (the Models page's).
  ComparePanel(std::function<LoadSettings()> settingsSource, QWidget* parent = nullptr);
  ~ComparePanel() override;

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
  bool exportTo(const QString& path, QString* error = nullptr) const;  // .csv or .json

 signals:
  void comparisonFinished(bool cancelled);

 private:
  void updateChart();
  void updateButtons();
  void askExport();

  std::function<LoadSettings()> m_settingsSource;
  CompareTask* m_task = nullptr;
  CompareSpec m_spec;
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
