// The Serve page: start and stop the OpenAI-compatible server on the loaded model (host, port,
// API key), its URL and a copyable curl command, a warning when it would listen beyond loopback
// without an API key, and the live request log (filterable with Find).
#pragma once

#include <QWidget>

#include "ui/bridge/bridge_types.h"

class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;
class QSortFilterProxyModel;
class QSpinBox;
class QTableView;

namespace lathe::ui {

class EngineBridge;
class MessageBanner;
class RequestLogModel;

class ServePanel : public QWidget {
  Q_OBJECT
 public:
  explicit ServePanel(EngineBridge* bridge, QWidget* parent = nullptr);

  ServeSettings settings() const;
  void setSettings(const ServeSettings& settings);
  RequestLogModel* log() const { return m_log; }
  QString curlCommand() const;
  bool isExposedWithoutKey() const;  // the warning condition
  MessageBanner* warning() const { return m_warning; }

  // True for 127.0.0.0/8, ::1 and "localhost".
  static bool isLoopbackHost(const QString& host);

 public slots:
  void start();
  void stop();
  void startFind();

 private:
  void updateState();
  void updateWarning();
  void saveSettings() const;

  EngineBridge* m_bridge;
  RequestLogModel* m_log = nullptr;
  QSortFilterProxyModel* m_proxy = nullptr;
  MessageBanner* m_warning = nullptr;
  MessageBanner* m_error = nullptr;
  QLineEdit* m_host = nullptr;
  QSpinBox* m_port = nullptr;
  QLineEdit* m_apiKey = nullptr;
  QPushButton* m_startButton = nullptr;
  QPushButton* m_stopButton = nullptr;
  QLabel* m_status = nullptr;
  QLineEdit* m_url = nullptr;
  QPlainTextEdit* m_curl = nullptr;
  QLineEdit* m_filter = nullptr;
  QTableView* m_table = nullptr;
  QLabel* m_summary = nullptr;
};

}  // namespace lathe::ui
