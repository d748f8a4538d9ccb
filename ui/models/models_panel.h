// The Models page: open a model (drag-and-drop onto the window, File ▸ Open, the recent list), see
// its card and memory plan for the current load settings, load and unload it with progress and
// cancel. Errors (unreadable or corrupt files, failed loads) appear in an inline banner naming the
// file and the cause; the page stays usable.
#pragma once

#include <QWidget>

#include "ui/bridge/bridge_types.h"

class QLabel;
class QListView;
class QProgressBar;
class QPushButton;

namespace lathe::ui {

class EngineBridge;
class LoadSettingsWidget;
class MessageBanner;
class ModelCard;
class PresetStore;
class RecentModels;

class ModelsPanel : public QWidget {
  Q_OBJECT
 public:
  // None owned; all must outlive the panel.
  ModelsPanel(EngineBridge* bridge, PresetStore* presets, RecentModels* recent,
              QWidget* parent = nullptr);

  ModelCard* card() const { return m_card; }
  LoadSettingsWidget* loadSettings() const { return m_settings; }
  MessageBanner* banner() const { return m_banner; }
  QString currentPath() const { return m_currentPath; }
  const ModelSummary& currentModel() const { return m_current; }

 public slots:
  // Shows the model's card (inspecting it on a pool thread). load: load it as soon as its card is
  // ready (startup, "lathe-studio MODEL").
  void openModel(const QString& path, bool load = false);
  void loadCurrent();
  void unload();
  void cancelLoad();
  void showOpenFileDialog();
  void showOpenFolderDialog();

 signals:
  void modelOpened(const lathe::ui::ModelSummary& model);
  // "Quantize…" was clicked for the current model.
  void quantizeRequested(const QString& path);

 private:
  void onInspected(const ModelSummary& model);
  void onInspectFailed(const QString& path, const QString& message);
  void onStateChanged();
  void updatePlan();

  EngineBridge* m_bridge;
  RecentModels* m_recent;
  QString m_currentPath;
  ModelSummary m_current;
  bool m_loadWhenInspected = false;

  MessageBanner* m_banner = nullptr;
  QListView* m_recentView = nullptr;
  ModelCard* m_card = nullptr;
  LoadSettingsWidget* m_settings = nullptr;
  QPushButton* m_loadButton = nullptr;
  QPushButton* m_unloadButton = nullptr;
  QPushButton* m_cancelButton = nullptr;
  QPushButton* m_quantizeButton = nullptr;
  QProgressBar* m_progress = nullptr;
  QLabel* m_status = nullptr;
};

}  // namespace lathe::ui
