#include "ui/compare/compare_panel.h"

#include "ui/bridge/quantize_task.h"

#include <qcustomplot.h>

#include <algorithm>

#include <QComboBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QMenu>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QTableView>
#include <QToolButton>
#include <QVBoxLayout>

#include "ui/bridge/compare_task.h"
#include "ui/common/message_banner.h"
#include "ui/compare/compare_export.h"
#include "ui/compare/compare_results.h"
#include "ui/compare/compare_run_store.h"

namespace lathe::ui {

namespace {

constexpr int kMaxModels = 4;
constexpr int kRecentRuns = 8;  // listed under Open run…

}  // namespace

QVector<int> parseConcurrencyLevels(const QString& text, QString* error) {
  QVector<int> levels;
  for (const QString& part : text.split(QLatin1Char(','), Qt::SkipEmptyParts)) {
    bool ok = false;
    const int v = part.trimmed().toInt(&ok);
    if (!ok || v < 1 || v > 4096) {
      if (error)
        *error = QObject::tr(
                     "Concurrency levels are whole numbers from 1 to 4096 separated by "
                     "commas, like \"1, 4, 16, 64\"; \"%1\" is not one.")
                     .arg(part.trimmed());
      return {};
    }
    levels.push_back(v);
  }
  if (levels.isEmpty() && error)
    *error = QObject::tr("Give at least one concurrency level, like \"1, 4, 16\".");
  return levels;
}

ComparePanel::ComparePanel(std::function<LoadSettings()> settingsSource, QWidget* parent,
                           const QString& runsFolder)
    : QWidget(parent),
      m_settingsSource(std::move(settingsSource)),
      m_runsFolder(runsFolder.isEmpty() ? defaultCompareRunsFolder() : runsFolder) {
  m_io.setMaxThreadCount(1);
  m_task = new CompareTask(this);
  m_results = new CompareResultsModel(this);
  auto* root = new QVBoxLayout(this);
  m_banner = new MessageBanner;
  m_banner->setObjectName(QStringLiteral("compareBanner"));
  root->addWidget(m_banner);

  auto* top = new QHBoxLayout;
  auto* modelsBox = new QGroupBox(tr("Models (2-4; the first is the reference)"));
  auto* modelsLayout = new QVBoxLayout(modelsBox);
  m_models = new QListWidget;
  m_models->setObjectName(QStringLiteral("compareModels"));
  m_models->setMaximumHeight(110);
  modelsLayout->addWidget(m_models);
  auto* addRow = new QHBoxLayout;
  m_offers = new QComboBox;
  m_offers->setObjectName(QStringLiteral("compareOffers"));
  m_offers->setToolTip(tr("Models opened in this session and the quantization wizard's outputs."));
  m_offers->setMinimumContentsLength(24);
  m_add = new QPushButton(tr("Add"));
  auto* browse = new QPushButton(tr("Browse…"));
  m_remove = new QPushButton(tr("Remove"));
  addRow->addWidget(m_offers, 1);
  addRow->addWidget(m_add);
  addRow->addWidget(browse);
  addRow->addWidget(m_remove);
  modelsLayout->addLayout(addRow);
  top->addWidget(modelsBox, 3);

  auto* sweepBox = new QGroupBox(tr("Measurements"));
  auto* form = new QFormLayout(sweepBox);
  m_levels = new QLineEdit(QStringLiteral("1, 4, 16, 64, 128, 300"));
  m_levels->setObjectName(QStringLiteral("compareLevels"));
  m_levels->setToolTip(
      tr("Requests in flight at once for the serving sweep; each level sends "
         "twice as many requests (at least 4)."));
  form->addRow(tr("Concurrency:"), m_levels);
  m_inputLen = new QSpinBox;
  m_inputLen->setObjectName(QStringLiteral("compareInputLen"));
  m_inputLen->setRange(1, 32768);
  m_inputLen->setValue(128);
  m_inputLen->setSuffix(tr(" tokens"));
  m_inputLen->setToolTip(tr("Prompt length of every request (random token ids)."));
  form->addRow(tr("Prompt:"), m_inputLen);
  m_outputLen = new QSpinBox;
  m_outputLen->setObjectName(QStringLiteral("compareOutputLen"));
  m_outputLen->setRange(1, 8192);
  m_outputLen->setValue(64);
  m_outputLen->setSuffix(tr(" tokens"));
  m_outputLen->setToolTip(tr("Tokens generated per request (end of text ignored)."));
  form->addRow(tr("Output:"), m_outputLen);
  top->addWidget(sweepBox, 2);
  root->addLayout(top);

  auto* controls = new QHBoxLayout;
  m_run = new QPushButton(QIcon(QStringLiteral(":/icons/load.svg")), tr("Run comparison"));
  m_run->setObjectName(QStringLiteral("compareRun"));
  m_run->setToolTip(
      tr("Loads each model in turn on the device of the load settings and measures "
         "it; the window stays usable."));
  m_stop = new QPushButton(QIcon(QStringLiteral(":/icons/stop.svg")), tr("Stop"));
  m_stop->setObjectName(QStringLiteral("compareStop"));
  m_export = new QPushButton(tr("Export…"));
  m_export->setObjectName(QStringLiteral("compareExport"));
  m_export->setToolTip(
      tr("Save the results as CSV (one row per model and level), JSON (the whole run, which "
         "Open run… reads), the chart as PNG, or a Markdown report with every chart."));
  m_open = new QToolButton;
  m_open->setObjectName(QStringLiteral("compareOpenRun"));
  m_open->setText(tr("Open run…"));
  m_open->setToolTip(
      tr("Show a saved comparison again, without measuring: every finished run is saved in "
         "%1; the arrow lists the recent ones.")
          .arg(QDir::toNativeSeparators(m_runsFolder)));
  m_open->setPopupMode(QToolButton::MenuButtonPopup);
  m_open->setMenu(new QMenu(m_open));
  m_progress = new QProgressBar;
  m_progress->setObjectName(QStringLiteral("compareProgress"));
  m_progress->setRange(0, 1000);
  m_status = new QLabel;
  m_status->setObjectName(QStringLiteral("compareStatus"));
  controls->addWidget(m_run);
  controls->addWidget(m_stop);
  controls->addWidget(m_export);
  controls->addWidget(m_open);
  controls->addWidget(m_progress, 1);
  controls->addWidget(m_status, 2);
  root->addLayout(controls);

  auto* splitter = new QSplitter(Qt::Vertical);
  m_table = new QTableView;
  m_table->setObjectName(QStringLiteral("compareTable"));
  m_table->setModel(m_results);
  m_table->verticalHeader()->hide();
  m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);
  splitter->addWidget(m_table);
  auto* chartBox = new QWidget;
  auto* chartLayout = new QVBoxLayout(chartBox);
  chartLayout->setContentsMargins(0, 0, 0, 0);
  auto* chartHeader = new QHBoxLayout;
  chartHeader->addWidget(new QLabel(tr("Chart:")));
  m_metric = new QComboBox;
  m_metric->setObjectName(QStringLiteral("compareMetric"));
  for (int m = 0; m < kCompareMetricCount; ++m)
    m_metric->addItem(compareMetricTitle(static_cast<CompareMetric>(m)));
  chartHeader->addWidget(m_metric);
  chartHeader->addStretch(1);
  chartLayout->addLayout(chartHeader);
  m_plot = new QCustomPlot;
  m_plot->setObjectName(QStringLiteral("comparePlot"));
  m_plot->setMinimumHeight(220);
  setupComparePlot(m_plot);
  chartLayout->addWidget(m_plot, 1);
  m_verdict = new QLabel;
  m_verdict->setObjectName(QStringLiteral("compareVerdict"));
  m_verdict->setWordWrap(true);
  m_verdict->setTextInteractionFlags(Qt::TextSelectableByMouse);
  chartLayout->addWidget(m_verdict);
  splitter->addWidget(chartBox);
  root->addWidget(splitter, 1);

  connect(m_add, &QPushButton::clicked, this,
          [this] { addModel(m_offers->currentData().toString()); });
  connect(browse, &QPushButton::clicked, this, [this] {
    const QString path = QFileDialog::getOpenFileName(this, tr("Add a model"), QString(),
                                                      tr("GGUF models (*.gguf);;All files (*)"));
    if (!path.isEmpty()) addModel(path);
  });
  connect(m_remove, &QPushButton::clicked, this, [this] {
    delete m_models->currentItem();
    updateButtons();
  });
  connect(m_run, &QPushButton::clicked, this, &ComparePanel::run);
  connect(m_stop, &QPushButton::clicked, this, &ComparePanel::stop);
  connect(m_export, &QPushButton::clicked, this, &ComparePanel::askExport);
  connect(m_open, &QToolButton::clicked, this, &ComparePanel::askOpenRun);
  connect(m_metric, &QComboBox::currentIndexChanged, this, &ComparePanel::updateChart);
  connect(m_task, &CompareTask::progress, this, [this](const CompareProgressInfo& p) {
    m_progress->setValue(qRound(p.fraction * 1000));
    m_status->setText(tr("Model %1 of %2 — %3").arg(p.variant + 1).arg(p.numVariants).arg(p.stage));
  });
  connect(m_task, &CompareTask::variantMeasured, this, [this](int i, const CompareVariant& v) {
    m_results->setVariant(i, v);
    m_table->resizeColumnsToContents();
    m_table->resizeRowsToContents();
    updateChart();
  });
  connect(m_task, &CompareTask::finished, this, [this](bool cancelled) {
    m_progress->setValue(cancelled ? m_progress->value() : 1000);
    m_status->setText(cancelled ? tr("Stopped.") : tr("Done."));
    m_verdict->setText(compareVerdict(m_results->variants()));
    m_finished = QDateTime::currentDateTimeUtc();
    updateButtons();
    // A stopped run is incomplete: it stays on screen (and can be exported) but is not saved.
    if (!cancelled && m_results->rowCount() > 0) saveRun();
    emit comparisonFinished(cancelled);
  });
  updateButtons();
  rebuildOpenMenu();  // Browse… at once; the recent runs when listed
  refreshRecentRuns();
}

ComparePanel::~ComparePanel() {
  m_task->cancel();
  m_io.waitForDone();  // a save or an export in progress completes
}

void ComparePanel::offerModel(const QString& path) {
  if (path.isEmpty() || m_offers->findData(path) >= 0) return;
  m_offers->insertItem(0, QFileInfo(path).fileName(), path);
  m_offers->setItemData(0, path, Qt::ToolTipRole);
  m_offers->setCurrentIndex(0);
  updateButtons();
}

void ComparePanel::addModel(const QString& path) {
  if (path.isEmpty() || m_models->count() >= kMaxModels || models().contains(path)) return;
  offerModel(path);
  auto* item = new QListWidgetItem(QFileInfo(path).fileName(), m_models);
  item->setData(Qt::UserRole, path);
  item->setToolTip(path);
  updateButtons();
}

void ComparePanel::setModels(const QStringList& paths) {
  m_models->clear();
  for (const QString& p : paths) addModel(p);
}

QStringList ComparePanel::models() const {
  QStringList out;
  for (int i = 0; i < m_models->count(); ++i)
    out << m_models->item(i)->data(Qt::UserRole).toString();
  return out;
}

void ComparePanel::setConcurrency(const QString& levels) {
  m_levels->setText(levels);
}

void ComparePanel::setLengths(int inputLen, int outputLen) {
  m_inputLen->setValue(inputLen);
  m_outputLen->setValue(outputLen);
}

void ComparePanel::setMetric(Metric metric) {
  m_metric->setCurrentIndex(static_cast<int>(metric));
}

bool ComparePanel::isRunning() const {
  return m_task->isRunning();
}

bool ComparePanel::run() {
  m_banner->clear();
  if (m_task->isRunning()) return false;
  CompareSpec spec;
  spec.models = models();
  if (spec.models.size() < 2) {
    m_banner->showMessage(MessageBanner::Kind::kError,
                          tr("Choose at least two models to compare (Add or Browse…)."));
    return false;
  }
  QString error;
  spec.concurrency = parseConcurrencyLevels(m_levels->text(), &error);
  if (spec.concurrency.isEmpty()) {
    m_banner->showMessage(MessageBanner::Kind::kError, error);
    return false;
  }
  spec.inputLen = m_inputLen->value();
  spec.outputLen = m_outputLen->value();
  spec.maxModelLen = spec.inputLen + spec.outputLen + 16;
  spec.evalText = defaultEvalTextPath();  // the quality column: against the first model
  m_spec = spec;
  m_results->clear();
  m_verdict->clear();
  updateChart();
  m_progress->setValue(0);
  m_task->start(spec, m_settingsSource ? m_settingsSource() : LoadSettings{});
  updateButtons();
  return true;
}

void ComparePanel::stop() {
  m_task->cancel();
  m_status->setText(tr("Stopping…"));
}

void ComparePanel::updateButtons() {
  const bool running = m_task->isRunning();
  m_run->setEnabled(!running && m_models->count() >= 2);
  m_stop->setEnabled(running);
  m_export->setEnabled(!running && m_results->rowCount() > 0);
  m_open->setEnabled(!running);
  m_add->setEnabled(!running && m_offers->count() > 0 && m_models->count() < kMaxModels);
  m_remove->setEnabled(!running && m_models->count() > 0);
  m_progress->setVisible(running || m_progress->value() > 0);
}

void ComparePanel::updateChart() {
  plotCompareMetric(m_plot, m_spec.concurrency, m_results->variants(),
                    static_cast<Metric>(m_metric->currentIndex()));
}

QString ComparePanel::verdict() const {
  return m_verdict->text();
}

CompareRun ComparePanel::currentRun() const {
  return {m_spec, m_results->variants(), m_verdict->text(), m_finished};
}

void ComparePanel::showRun(const CompareRun& run) {
  if (m_task->isRunning()) return;
  m_spec = run.spec;
  m_finished = run.finished;
  setModels(run.spec.models);
  QStringList levels;
  for (int level : run.spec.concurrency) levels << QString::number(level);
  m_levels->setText(levels.join(QStringLiteral(", ")));
  m_inputLen->setValue(run.spec.inputLen);
  m_outputLen->setValue(run.spec.outputLen);
  m_results->setVariants(run.variants);
  m_table->resizeColumnsToContents();
  m_table->resizeRowsToContents();
  m_verdict->setText(run.verdict);
  m_progress->setValue(0);
  m_status->setText(tr("Saved run of %1")
                        .arg(QLocale().toString(run.finished.toLocalTime(), QLocale::ShortFormat)));
  updateChart();
  updateButtons();
}

bool ComparePanel::exportTo(const QString& path, QString* error) {
  QString why;
  QVector<ExportFile> files;
  if (m_results->rowCount() == 0)
    why = tr("Nothing to export yet: run a comparison or open a saved one.");
  else
    files = compareExportFiles(currentRun(), path, static_cast<Metric>(m_metric->currentIndex()),
                               m_plot->size(), &why);
  if (files.isEmpty()) {
    m_banner->showMessage(MessageBanner::Kind::kError, why);
    if (error) *error = why;
    return false;
  }
  m_io.start([this, path, files] {
    const QString failure = writeExportFiles(files);
    QMetaObject::invokeMethod(
        this,
        [this, path, failure, count = files.size()] {
          if (!failure.isEmpty())
            m_banner->showMessage(MessageBanner::Kind::kError, failure);
          else
            m_status->setText(count > 1 ? tr("Exported %1 and %2 charts next to it.")
                                              .arg(QFileInfo(path).fileName())
                                              .arg(count - 1)
                                        : tr("Exported %1.").arg(QFileInfo(path).fileName()));
          emit exportFinished(path, failure);
        },
        Qt::QueuedConnection);
  });
  return true;
}

void ComparePanel::askExport() {
  QString filter;
  const QString path = QFileDialog::getSaveFileName(
      this, tr("Export comparison"), QStringLiteral("comparison.md"),
      tr("Markdown report with every chart (*.md);;CSV (*.csv);;JSON, reopened by Open run… "
         "(*.json);;The chart as PNG (*.png)"),
      &filter);
  if (!path.isEmpty()) exportTo(path);
}

void ComparePanel::saveRun() {
  const CompareRun run = currentRun();
  m_io.start([this, run, folder = m_runsFolder] {
    QString error;
    const QString path = saveCompareRun(folder, run, &error);
    QMetaObject::invokeMethod(
        this,
        [this, path, error] {
          if (path.isEmpty())
            m_banner->showMessage(MessageBanner::Kind::kWarning,
                                  tr("The comparison is shown but was not saved: %1").arg(error));
          emit runSaved(path);
        },
        Qt::QueuedConnection);
  });
  refreshRecentRuns();  // after the save: one thread runs them in order
}

void ComparePanel::openRun(const QString& path) {
  m_io.start([this, path] {
    CompareRun run;
    QString error;
    const bool ok = loadCompareRun(path, &run, &error);
    QMetaObject::invokeMethod(
        this,
        [this, path, ok, run, error] {
          if (!ok || m_task->isRunning()) {
            m_banner->showMessage(
                MessageBanner::Kind::kError,
                ok ? tr("Stop the comparison that is running before opening a saved one.")
                   : tr("Cannot open the saved comparison %1").arg(error));
            emit runOpened(path, false);
            return;
          }
          m_banner->clear();
          showRun(run);
          emit runOpened(path, true);
        },
        Qt::QueuedConnection);
  });
}

void ComparePanel::askOpenRun() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Open a saved comparison"),
                                                    m_runsFolder, tr("Comparisons (*.json)"));
  if (!path.isEmpty()) openRun(path);
}

QVector<QPair<QString, QString>> ComparePanel::recentRuns() const {
  return m_recent;
}

void ComparePanel::refreshRecentRuns() {
  m_io.start([this, folder = m_runsFolder] {
    const QVector<SavedCompareRun> runs = listCompareRuns(folder, kRecentRuns);
    QVector<QPair<QString, QString>> recent;
    for (const SavedCompareRun& r : runs) recent.push_back({r.path, r.label});
    QMetaObject::invokeMethod(
        this,
        [this, recent] {
          m_recent = recent;
          rebuildOpenMenu();
          emit recentRunsChanged();
        },
        Qt::QueuedConnection);
  });
}

void ComparePanel::rebuildOpenMenu() {
  QMenu* menu = m_open->menu();
  menu->clear();
  if (m_recent.isEmpty()) menu->addAction(tr("No saved runs yet"))->setEnabled(false);
  for (const auto& [path, label] : m_recent) {
    QAction* a = menu->addAction(label, this, [this, path] { openRun(path); });
    a->setToolTip(path);
  }
  menu->addSeparator();
  menu->addAction(tr("Browse…"), this, &ComparePanel::askOpenRun);
}

}  // namespace lathe::ui
