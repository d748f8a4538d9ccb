#include "ui/app/main_window.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileInfo>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QSettings>
#include <QStatusBar>
#include <QTabWidget>

#include "ui/bridge/engine_bridge.h"
#include "ui/bridge/quantize_task.h"
#include "ui/chat/chat_panel.h"
#include "ui/chat/conversation_store.h"
#include "ui/compare/compare_panel.h"
#include "ui/dashboard/dashboard_panel.h"
#include "ui/models/model_drop.h"
#include "ui/models/models_panel.h"
#include "ui/models/recent_models.h"
#include "ui/quantize/calibration_page.h"
#include "ui/quantize/quantize_wizard.h"
#include "ui/quantize/run_page.h"
#include "ui/serve/serve_panel.h"
#include "ui/settings/appearance.h"
#include "ui/settings/load_settings_widget.h"
#include "ui/settings/preferences_dialog.h"
#include "ui/settings/preset_store.h"

namespace lathe::ui {

MainWindow::MainWindow(EngineBridge* bridge, const QString& conversationsFolder, QWidget* parent)
    : QMainWindow(parent), m_bridge(bridge) {
  setWindowTitle(QStringLiteral("Lathe Studio"));
  setWindowIcon(QIcon(QStringLiteral(":/icons/lathe-studio.svg")));
  setAcceptDrops(true);

  m_presets = new PresetStore(nullptr, this);
  m_recent = new RecentModels(nullptr, this);
  m_conversations = new ConversationStore(conversationsFolder, this);
  m_quantizeTask = new QuantizeTask(this);

  m_models = new ModelsPanel(m_bridge, m_presets, m_recent);
  m_chat = new ChatPanel(m_bridge, m_conversations);
  m_serve = new ServePanel(m_bridge);
  m_dashboard = new DashboardPanel(m_bridge);
  m_compare = new ComparePanel([this] { return m_models->loadSettings()->settings(); });
  m_pages = new QTabWidget;
  m_pages->setObjectName(QStringLiteral("pages"));
  m_pages->setDocumentMode(true);
  m_pages->addTab(m_models, QIcon(QStringLiteral(":/icons/models.svg")), tr("&Models"));
  m_pages->addTab(m_chat, QIcon(QStringLiteral(":/icons/chat.svg")), tr("&Chat"));
  m_pages->addTab(m_serve, QIcon(QStringLiteral(":/icons/serve.svg")), tr("&Serve"));
  m_pages->addTab(m_dashboard, QIcon(QStringLiteral(":/icons/dashboard.svg")), tr("&Dashboard"));
  m_pages->addTab(m_compare, QIcon(QStringLiteral(":/icons/dashboard.svg")), tr("C&ompare"));
  setCentralWidget(m_pages);

  m_modelStatus = new QLabel;
  m_modelStatus->setObjectName(QStringLiteral("modelStatus"));
  m_serverStatus = new QLabel;
  m_serverStatus->setObjectName(QStringLiteral("serverStatus"));
  statusBar()->addWidget(m_modelStatus, 1);
  m_jobStatus = new QLabel;
  m_jobStatus->setObjectName(QStringLiteral("jobStatus"));
  statusBar()->addPermanentWidget(m_jobStatus);
  statusBar()->addPermanentWidget(m_serverStatus);
  connect(m_quantizeTask, &QuantizeTask::progress, this, &MainWindow::showQuantizeStatus);
  connect(m_quantizeTask, &QuantizeTask::started, this, &MainWindow::showQuantizeStatus);
  connect(m_quantizeTask, &QuantizeTask::finished, this, [this](const QuantizeOutcome& o) {
    m_jobStatus->clear();
    if (o.kind == QuantizeOutcome::Kind::kFinished) m_compare->offerModel(o.output);
    const QString name = QFileInfo(o.output).fileName();
    statusBar()->showMessage(o.kind == QuantizeOutcome::Kind::kFinished
                                 ? tr("Quantized model written: %1").arg(o.output)
                             : o.kind == QuantizeOutcome::Kind::kCancelled
                                 ? tr("Quantization of %1 stopped; nothing was written.").arg(name)
                                 : tr("Quantization of %1 failed: %2").arg(name, o.message),
                             15000);
  });
  connect(m_models, &ModelsPanel::quantizeRequested, this,
          [this](const QString& path) { openQuantizeWizard(path); });
  connect(m_models, &ModelsPanel::modelOpened, this, &MainWindow::onModelOpened);
  connect(m_models, &ModelsPanel::modelOpened, this,
          [this](const ModelSummary& model) { m_compare->offerModel(model.path); });

  buildMenus();
  connect(m_recent, &QAbstractItemModel::modelReset, this, &MainWindow::rebuildRecentMenu);
  connect(m_recent, &QAbstractItemModel::rowsRemoved, this, &MainWindow::rebuildRecentMenu);
  connect(m_bridge, &EngineBridge::modelLoaded, this, &MainWindow::updateStatus);
  connect(m_bridge, &EngineBridge::stateChanged, this, &MainWindow::updateStatus);
  connect(m_bridge, &EngineBridge::serverStarted, this, &MainWindow::updateStatus);
  connect(m_bridge, &EngineBridge::serverStopped, this, &MainWindow::updateStatus);
  connect(m_bridge, &EngineBridge::loadProgress, this, [this](double f, const QString& stage) {
    m_modelStatus->setText(tr("Loading %1… %2 (%3 %)")
                               .arg(QFileInfo(m_models->currentPath()).fileName(), stage)
                               .arg(qRound(f * 100)));
  });
  // A freshly loaded model is for chatting: go there unless the user is elsewhere already.
  connect(m_bridge, &EngineBridge::modelLoaded, this, [this] {
    if (m_pages->currentWidget() == m_models) showPage(kChatPage);
  });

  QSettings s;
  restoreGeometry(s.value(QStringLiteral("window/geometry")).toByteArray());
  restoreState(s.value(QStringLiteral("window/state")).toByteArray());
  m_pages->setCurrentIndex(s.value(QStringLiteral("window/page"), 0).toInt());
  if (!s.contains(QStringLiteral("window/geometry"))) resize(1360, 880);
  updateStatus();
}

MainWindow::~MainWindow() = default;

void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  QAction* open = file->addAction(QIcon(QStringLiteral(":/icons/open.svg")), tr("&Open Model…"),
                                  m_models, &ModelsPanel::showOpenFileDialog);
  open->setShortcut(QKeySequence::Open);
  QAction* openFolder =
      file->addAction(tr("Open Model &Folder…"), m_models, &ModelsPanel::showOpenFolderDialog);
  openFolder->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_O));
  m_recentMenu = file->addMenu(tr("&Recent Models"));
  rebuildRecentMenu();
  file->addSeparator();
  QAction* quantize =
      file->addAction(tr("&Quantize Model…"), this, [this] { openQuantizeWizard(); });
  quantize->setObjectName(QStringLiteral("quantizeAction"));
  quantize->setStatusTip(tr("Make a smaller copy of the model on the Models page."));
  file->addAction(QIcon(QStringLiteral(":/icons/unload.svg")), tr("&Unload Model"), m_models,
                  &ModelsPanel::unload);
  file->addSeparator();
  QAction* quit = file->addAction(tr("&Quit"), this, &QWidget::close);
  quit->setShortcut(QKeySequence::Quit);
  quit->setMenuRole(QAction::QuitRole);

  QMenu* edit = menuBar()->addMenu(tr("&Edit"));
  QAction* find = edit->addAction(tr("&Find…"), this, &MainWindow::findInCurrentPage);
  find->setShortcut(QKeySequence::Find);
  edit->addSeparator();
  QAction* prefs = edit->addAction(QIcon(QStringLiteral(":/icons/preferences.svg")),
                                   tr("&Preferences…"), this, &MainWindow::showPreferences);
  // Not every platform theme defines a Preferences key; Ctrl+, is the common one.
  prefs->setShortcuts(QKeySequence::keyBindings(QKeySequence::Preferences).isEmpty()
                          ? QList<QKeySequence>{QKeySequence(Qt::CTRL | Qt::Key_Comma)}
                          : QKeySequence::keyBindings(QKeySequence::Preferences));
  prefs->setMenuRole(QAction::PreferencesRole);

  QMenu* view = menuBar()->addMenu(tr("&View"));
  const QList<QPair<QString, Page>> pages = {{tr("&Models"), kModelsPage},
                                             {tr("&Chat"), kChatPage},
                                             {tr("&Serve"), kServePage},
                                             {tr("&Dashboard"), kDashboardPage},
                                             {tr("C&ompare"), kComparePage}};
  for (const auto& [name, page] : pages) {
    QAction* a = view->addAction(name, this, [this, page = page] { showPage(page); });
    a->setShortcut(QKeySequence(Qt::CTRL | (Qt::Key_1 + static_cast<int>(page))));
  }

  QMenu* help = menuBar()->addMenu(tr("&Help"));
  help->addAction(tr("&About Lathe Studio"), this, [this] {
    QMessageBox::about(this, tr("About Lathe Studio"),
                       tr("<h3>Lathe Studio %1</h3><p>A workbench for LLM inference: inspect a "
                          "model's memory cost, load it, chat with it, serve it over an "
                          "OpenAI-compatible API and watch the engine work.</p>")
                           .arg(QApplication::applicationVersion()));
  });
  help->addAction(tr("About &Qt"), qApp, &QApplication::aboutQt);
}

void MainWindow::rebuildRecentMenu() {
  m_recentMenu->clear();
  for (const QString& path : m_recent->paths()) {
    QAction* a = m_recentMenu->addAction(QFileInfo(path).fileName(), this,
                                         [this, path] { openModel(path); });
    a->setToolTip(path);
    a->setEnabled(QFileInfo::exists(path));
  }
  if (m_recent->paths().isEmpty()) m_recentMenu->addAction(tr("(none)"))->setEnabled(false);
  m_recentMenu->addSeparator();
  m_recentMenu->addAction(tr("Clear List"), m_recent, &RecentModels::clear);
}

void MainWindow::showPage(Page page) {
  m_pages->setCurrentIndex(static_cast<int>(page));
}

void MainWindow::openModel(const QString& path, bool load) {
  showPage(kModelsPage);
  m_models->openModel(path, load);
}

void MainWindow::showPreferences() {
  PreferencesDialog dialog(m_presets, m_conversations->folder(), this);
  if (dialog.exec() != QDialog::Accepted) return;
  m_bridge->setCpuThreads(dialog.preferences().cpuThreads);
  applyAppearance(dialog.preferences().appearance);
}

void MainWindow::findInCurrentPage() {
  if (m_pages->currentWidget() == m_chat)
    m_chat->startFind();
  else if (m_pages->currentWidget() == m_serve)
    m_serve->startFind();
  else
    statusBar()->showMessage(tr("Find works on the Chat and Serve pages."), 3000);
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event) {
  if (!modelPathFromMimeData(event->mimeData()).isEmpty()) event->acceptProposedAction();
}

void MainWindow::dragMoveEvent(QDragMoveEvent* event) {
  if (!modelPathFromMimeData(event->mimeData()).isEmpty()) event->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* event) {
  const QString path = modelPathFromMimeData(event->mimeData());
  if (path.isEmpty()) return;
  event->acceptProposedAction();
  m_droppedPath = path;
  openModel(path);
}

void MainWindow::onModelOpened() {
  // A dropped model that does not fit the device: offer to make it smaller.
  const ModelSummary& model = m_models->currentModel();
  if (m_droppedPath.isEmpty() || model.path != m_droppedPath) return;
  m_droppedPath.clear();
  const MemoryPlan plan = m_bridge->planMemory(model, m_models->loadSettings()->settings());
  if (plan.verdict == MemoryPlan::Verdict::kDoesNotFit) openQuantizeWizard(model.path);
}

QuantizeWizard* MainWindow::openQuantizeWizard(const QString& path) {
  const QString model = path.isEmpty() ? m_models->currentPath() : path;
  if (model.isEmpty()) {
    statusBar()->showMessage(tr("Open a model first (File ▸ Open Model…), then quantize it."),
                             5000);
    return nullptr;
  }
  if (m_wizard != nullptr) {
    if (m_wizard->modelPath() == model) {
      m_wizard->raise();
      m_wizard->activateWindow();
      return m_wizard;
    }
    m_wizard->close();
  }
  m_wizard = new QuantizeWizard(m_quantizeTask, model, m_models->loadSettings()->settings(),
                                m_bridge->device(), this);
  m_wizard->setAttribute(Qt::WA_DeleteOnClose);
  m_wizard->calibrationPage()->setConversations(m_conversations);  // Step 2 offers them
  connect(m_wizard, &QObject::destroyed, this, [this, w = m_wizard] {
    if (m_wizard == w) m_wizard = nullptr;
  });
  connect(m_wizard, &QuantizeWizard::loadRequested, this, [this](const QString& out) {
    m_wizard->close();
    openModel(out, true);
  });
  connect(m_wizard, &QuantizeWizard::compareRequested, this,
          [this](const QString& original, const QString& quantized) {
            m_wizard->close();
            m_compare->setModels({original, quantized});
            showPage(kComparePage);
          });
  m_wizard->show();
  return m_wizard;
}

void MainWindow::showQuantizeStatus() {
  const QuantizeProgressInfo& p = m_quantizeTask->lastProgress();
  m_jobStatus->setText(tr("Quantizing %1: %2 % (%3, ETA %4)")
                           .arg(QFileInfo(m_quantizeTask->spec().output).fileName())
                           .arg(qRound(p.fraction() * 100))
                           .arg(describeLayer(p), formatDuration(p.etaSec)));
}

void MainWindow::closeEvent(QCloseEvent* event) {
  QSettings s;
  s.setValue(QStringLiteral("window/geometry"), saveGeometry());
  s.setValue(QStringLiteral("window/state"), saveState());
  s.setValue(QStringLiteral("window/page"), m_pages->currentIndex());
  QMainWindow::closeEvent(event);
}

void MainWindow::updateStatus() {
  switch (m_bridge->state()) {
    case EngineBridge::State::kEmpty:
      m_modelStatus->setText(tr("No model loaded"));
      break;
    case EngineBridge::State::kLoading:
      m_modelStatus->setText(tr("Loading %1…").arg(QFileInfo(m_models->currentPath()).fileName()));
      break;
    case EngineBridge::State::kUnloading:
      m_modelStatus->setText(tr("Unloading…"));
      break;
    case EngineBridge::State::kLoaded:
      m_modelStatus->setText(
          tr("%1 on %2").arg(m_bridge->loadedModel().name, m_bridge->loadedDevice()));
      break;
  }
  m_modelStatus->setToolTip(m_bridge->isLoaded() ? m_bridge->kvPlanSummary() : QString());
  m_serverStatus->setText(m_bridge->isServing() ? tr("Serving at %1").arg(m_bridge->serverUrl())
                                                : tr("Server off"));
  setWindowTitle(m_bridge->isLoaded()
                     ? QStringLiteral("%1 — Lathe Studio").arg(m_bridge->loadedModel().name)
                     : QStringLiteral("Lathe Studio"));
}

}  // namespace lathe::ui
