#include "ui/models/models_panel.h"

#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QListView>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QSettings>
#include <QSplitter>
#include <QVBoxLayout>

#include "ui/bridge/engine_bridge.h"
#include "ui/common/message_banner.h"
#include "ui/models/model_card.h"
#include "ui/models/model_drop.h"
#include "ui/models/recent_models.h"
#include "ui/settings/load_settings_widget.h"

namespace lathe::ui {

namespace {
// "Cannot open x.gguf: <why>", without repeating the file when the engine's message names it.
QString describeFailure(const QString& what, const QString& path, const QString& message) {
  const QString name = QFileInfo(path).fileName();
  QString why = message;
  if (why.startsWith(path + QStringLiteral(": ")))
    why = why.mid(path.size() + 2);
  else if (why.startsWith(name + QStringLiteral(": ")))
    why = why.mid(name.size() + 2);
  return QStringLiteral("%1 %2: %3").arg(what, name, why);
}
}  // namespace

ModelsPanel::ModelsPanel(EngineBridge* bridge, PresetStore* presets, RecentModels* recent,
                         QWidget* parent)
    : QWidget(parent), m_bridge(bridge), m_recent(recent) {
  auto* root = new QVBoxLayout(this);
  m_banner = new MessageBanner;
  m_banner->setObjectName(QStringLiteral("modelsBanner"));
  root->addWidget(m_banner);

  auto* splitter = new QSplitter(Qt::Horizontal);
  root->addWidget(splitter, 1);

  // Left: open buttons and recent models.
  auto* left = new QWidget;
  auto* leftLayout = new QVBoxLayout(left);
  leftLayout->setContentsMargins(0, 0, 0, 0);
  auto* openFile =
      new QPushButton(QIcon(QStringLiteral(":/icons/open.svg")), tr("Open model file…"));
  auto* openFolder =
      new QPushButton(QIcon(QStringLiteral(":/icons/open.svg")), tr("Open model folder…"));
  openFile->setToolTip(tr("A GGUF file (.gguf)"));
  openFolder->setToolTip(tr("A Hugging Face model folder (config.json, *.safetensors, tokenizer)"));
  leftLayout->addWidget(openFile);
  leftLayout->addWidget(openFolder);
  auto* hint = new QLabel(tr("…or drop a .gguf file or a model folder anywhere on the window."));
  hint->setWordWrap(true);
  hint->setForegroundRole(QPalette::PlaceholderText);
  leftLayout->addWidget(hint);
  leftLayout->addWidget(new QLabel(QStringLiteral("<b>%1</b>").arg(tr("Recent models"))));
  m_recentView = new QListView;
  m_recentView->setObjectName(QStringLiteral("recentModels"));
  m_recentView->setModel(m_recent);
  m_recentView->setEditTriggers(QAbstractItemView::NoEditTriggers);
  leftLayout->addWidget(m_recentView, 1);
  splitter->addWidget(left);

  // Right: card, settings, load controls (scrolls on small screens).
  auto* scroll = new QScrollArea;
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  auto* right = new QWidget;
  auto* rightLayout = new QVBoxLayout(right);
  m_card = new ModelCard;
  rightLayout->addWidget(m_card);

  auto* settingsBox = new QGroupBox(tr("Load settings"));
  auto* settingsLayout = new QVBoxLayout(settingsBox);
  m_settings = new LoadSettingsWidget(presets);
  m_settings->setGpuAvailable(m_bridge->device().isGpu, m_bridge->device().name);
  settingsLayout->addWidget(m_settings);
  rightLayout->addWidget(settingsBox);

  auto* controls = new QHBoxLayout;
  m_loadButton = new QPushButton(QIcon(QStringLiteral(":/icons/load.svg")), tr("Load"));
  m_loadButton->setObjectName(QStringLiteral("loadButton"));
  m_unloadButton = new QPushButton(QIcon(QStringLiteral(":/icons/unload.svg")), tr("Unload"));
  m_unloadButton->setObjectName(QStringLiteral("unloadButton"));
  m_cancelButton = new QPushButton(QIcon(QStringLiteral(":/icons/stop.svg")), tr("Cancel"));
  m_cancelButton->setObjectName(QStringLiteral("cancelButton"));
  m_quantizeButton = new QPushButton(tr("Quantize…"));
  m_quantizeButton->setObjectName(QStringLiteral("quantizeButton"));
  m_quantizeButton->setToolTip(
      tr("Make a smaller copy of this model (GGUF, FP8, INT8, INT4): see what each scheme costs "
         "and gives, then write it."));
  m_progress = new QProgressBar;
  m_progress->setObjectName(QStringLiteral("loadProgress"));
  m_progress->setRange(0, 1000);
  m_progress->setTextVisible(false);
  controls->addWidget(m_loadButton);
  controls->addWidget(m_unloadButton);
  controls->addWidget(m_cancelButton);
  controls->addWidget(m_quantizeButton);
  controls->addWidget(m_progress, 1);
  rightLayout->addLayout(controls);
  m_status = new QLabel;
  m_status->setObjectName(QStringLiteral("loadStatus"));
  m_status->setWordWrap(true);
  m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);
  rightLayout->addWidget(m_status);
  rightLayout->addStretch(1);
  scroll->setWidget(right);
  splitter->addWidget(scroll);
  splitter->setStretchFactor(0, 1);
  splitter->setStretchFactor(1, 4);
  splitter->setSizes({240, 900});

  connect(openFile, &QPushButton::clicked, this, &ModelsPanel::showOpenFileDialog);
  connect(openFolder, &QPushButton::clicked, this, &ModelsPanel::showOpenFolderDialog);
  connect(m_recentView, &QListView::activated, this, [this](const QModelIndex& index) {
    openModel(index.data(RecentModels::PathRole).toString());
  });
  connect(m_loadButton, &QPushButton::clicked, this, &ModelsPanel::loadCurrent);
  connect(m_unloadButton, &QPushButton::clicked, this, &ModelsPanel::unload);
  connect(m_cancelButton, &QPushButton::clicked, this, &ModelsPanel::cancelLoad);
  connect(m_quantizeButton, &QPushButton::clicked, this, [this] {
    if (m_current.isValid()) emit quantizeRequested(m_current.path);
  });
  connect(m_settings, &LoadSettingsWidget::settingsChanged, this, &ModelsPanel::updatePlan);

  connect(m_bridge, &EngineBridge::modelInspected, this, &ModelsPanel::onInspected);
  connect(m_bridge, &EngineBridge::inspectFailed, this, &ModelsPanel::onInspectFailed);
  connect(m_bridge, &EngineBridge::stateChanged, this, &ModelsPanel::onStateChanged);
  connect(m_bridge, &EngineBridge::loadProgress, this,
          [this](double fraction, const QString& stage) {
            m_progress->setValue(qRound(fraction * 1000.0));
            m_status->setText(tr("Loading: %1 (%2 %)").arg(stage).arg(qRound(fraction * 100.0)));
          });
  connect(m_bridge, &EngineBridge::modelLoaded, this, [this](const ModelSummary& model) {
    if (m_bridge->loadNotice().isEmpty())
      m_banner->clear();
    else
      m_banner->showMessage(MessageBanner::Kind::kInfo, m_bridge->loadNotice());
    m_status->setText(tr("Loaded %1 on %2. %3")
                          .arg(model.name, m_bridge->loadedDevice(), m_bridge->kvPlanSummary()));
  });
  connect(m_bridge, &EngineBridge::loadFailed, this,
          [this](const QString& path, const QString& msg) {
            m_banner->showMessage(MessageBanner::Kind::kError,
                                  describeFailure(tr("Could not load"), path, msg));
            m_status->setText(tr("No model loaded."));
          });
  connect(m_bridge, &EngineBridge::loadCancelled, this,
          [this] { m_status->setText(tr("Load cancelled. No model loaded.")); });
  connect(m_bridge, &EngineBridge::modelUnloaded, this,
          [this] { m_status->setText(tr("No model loaded.")); });
  onStateChanged();
  m_status->setText(tr("No model loaded."));
}

void ModelsPanel::openModel(const QString& path, bool load) {
  m_banner->clear();
  const QFileInfo info(path);
  if (path.isEmpty() || !info.exists()) {
    m_banner->showMessage(MessageBanner::Kind::kError,
                          tr("Cannot open %1: no such file or folder.").arg(path));
    return;
  }
  m_currentPath = modelPathForLocalFile(path);
  if (m_currentPath.isEmpty()) m_currentPath = info.absoluteFilePath();  // the loader explains why
  m_current = ModelSummary{};
  m_loadWhenInspected = load;
  m_card->setPending(m_currentPath);
  onStateChanged();
  m_bridge->inspectModel(m_currentPath);
}

void ModelsPanel::onInspected(const ModelSummary& model) {
  if (model.path != m_currentPath) return;  // a newer model was opened meanwhile
  m_current = model;
  m_card->setModel(model);
  updatePlan();
  m_recent->add(model.path);
  onStateChanged();
  emit modelOpened(model);
  if (m_loadWhenInspected) {
    m_loadWhenInspected = false;
    loadCurrent();
  }
}

void ModelsPanel::onInspectFailed(const QString& path, const QString& message) {
  if (path != m_currentPath) return;
  m_loadWhenInspected = false;
  m_current = ModelSummary{};
  m_card->clear();
  m_banner->showMessage(MessageBanner::Kind::kError,
                        describeFailure(tr("Cannot open"), path, message));
  onStateChanged();
}

void ModelsPanel::updatePlan() {
  if (!m_current.isValid()) return;
  m_card->setPlan(m_bridge->planMemory(m_current, m_settings->settings()));
}

void ModelsPanel::loadCurrent() {
  if (!m_current.isValid()) return;
  m_banner->clear();
  m_bridge->loadModel(m_current.path, m_settings->settings());
}

void ModelsPanel::unload() {
  m_bridge->unloadModel();
}

void ModelsPanel::cancelLoad() {
  m_bridge->cancelLoad();
  m_status->setText(tr("Cancelling…"));
}

void ModelsPanel::onStateChanged() {
  const EngineBridge::State s = m_bridge->state();
  const bool busy = s == EngineBridge::State::kLoading || s == EngineBridge::State::kUnloading;
  const bool sameModelLoaded =
      s == EngineBridge::State::kLoaded && m_bridge->loadedModel().path == m_current.path;
  m_loadButton->setEnabled(m_current.isValid() && !busy && !sameModelLoaded);
  m_loadButton->setText(s == EngineBridge::State::kLoaded && !sameModelLoaded
                            ? tr("Load (replaces %1)").arg(m_bridge->loadedModel().name)
                            : tr("Load"));
  m_unloadButton->setEnabled(s == EngineBridge::State::kLoaded);
  m_cancelButton->setEnabled(s == EngineBridge::State::kLoading);
  m_quantizeButton->setEnabled(m_current.isValid());
  m_progress->setVisible(s == EngineBridge::State::kLoading);
  if (s == EngineBridge::State::kLoading) m_progress->setValue(0);
  m_settings->setReadOnly(busy);
}

void ModelsPanel::showOpenFileDialog() {
  QSettings settings;
  const QString dir = settings.value(QStringLiteral("lastModelDir"), QDir::homePath()).toString();
  const QString path = QFileDialog::getOpenFileName(this, tr("Open model"), dir,
                                                    tr("GGUF models (*.gguf);;All files (*)"));
  if (path.isEmpty()) return;
  settings.setValue(QStringLiteral("lastModelDir"), QFileInfo(path).absolutePath());
  openModel(path);
}

void ModelsPanel::showOpenFolderDialog() {
  QSettings settings;
  const QString dir = settings.value(QStringLiteral("lastModelDir"), QDir::homePath()).toString();
  const QString path = QFileDialog::getExistingDirectory(this, tr("Open model folder"), dir);
  if (path.isEmpty()) return;
  settings.setValue(QStringLiteral("lastModelDir"), QFileInfo(path).absolutePath());
  openModel(path);
}

}  // namespace lathe::ui
