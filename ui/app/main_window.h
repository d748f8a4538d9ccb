// Lathe Studio's main window. It only composes: the feature pages (Models, Chat, Serve,
// Dashboard, Compare), the quantization wizard, the menus and shortcuts, the status bar,
// drag-and-drop of models onto the window, and window state in QSettings. Behaviour lives in the
// pages and the EngineBridge.
#pragma once

#include <QMainWindow>

class QLabel;
class QMenu;
class QTabWidget;

namespace lathe::ui {

class ChatPanel;
class ComparePanel;
class ConversationStore;
class DashboardPanel;
class EngineBridge;
class ModelsPanel;
class PresetStore;
class QuantizeTask;
class QuantizeWizard;
class RecentModels;
class ServePanel;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  enum Page { kModelsPage, kChatPage, kServePage, kDashboardPage, kComparePage };

  // bridge: not owned; must outlive the window. conversationsFolder: empty = the app data folder.
  explicit MainWindow(EngineBridge* bridge, const QString& conversationsFolder = QString(),
                      QWidget* parent = nullptr);
  ~MainWindow() override;

  ModelsPanel* models() const { return m_models; }
  ChatPanel* chat() const { return m_chat; }
  ServePanel* serve() const { return m_serve; }
  DashboardPanel* dashboard() const { return m_dashboard; }
  ComparePanel* compare() const { return m_compare; }
  ConversationStore* conversations() const { return m_conversations; }
  QTabWidget* pages() const { return m_pages; }
  QuantizeTask* quantizeTask() const { return m_quantizeTask; }
  QuantizeWizard* quantizeWizard() const { return m_wizard; }  // the open one, or null
  void showPage(Page page);

 public slots:
  // Opens a dropped / chosen model on the Models page (and loads it when `load`).
  void openModel(const QString& path, bool load = false);
  void showPreferences();
  // Opens the quantization wizard for `path` (the current model when empty); raises the open one.
  QuantizeWizard* openQuantizeWizard(const QString& path = QString());

 protected:
  void dragEnterEvent(QDragEnterEvent* event) override;
  void dragMoveEvent(QDragMoveEvent* event) override;
  void dropEvent(QDropEvent* event) override;
  void closeEvent(QCloseEvent* event) override;

 private:
  void buildMenus();
  void rebuildRecentMenu();
  void updateStatus();
  void findInCurrentPage();
  void onModelOpened();
  void showQuantizeStatus();

  EngineBridge* m_bridge;
  PresetStore* m_presets = nullptr;
  RecentModels* m_recent = nullptr;
  ConversationStore* m_conversations = nullptr;
  QTabWidget* m_pages = nullptr;
  ModelsPanel* m_models = nullptr;
  ChatPanel* m_chat = nullptr;
  ServePanel* m_serve = nullptr;
  DashboardPanel* m_dashboard = nullptr;
  ComparePanel* m_compare = nullptr;
  QMenu* m_recentMenu = nullptr;
  QLabel* m_modelStatus = nullptr;
  QLabel* m_serverStatus = nullptr;
  QLabel* m_jobStatus = nullptr;
  QuantizeTask* m_quantizeTask = nullptr;
  QuantizeWizard* m_wizard = nullptr;
  QString m_droppedPath;  // a dropped model: offer the wizard when it does not fit
};

}  // namespace lathe::ui
