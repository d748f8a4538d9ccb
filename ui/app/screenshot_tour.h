// `lathe-studio --screenshots DIR`: drives the window through each page with the model loaded and
// traffic running, and saves one PNG per page (QWidget::grab) into DIR, then quits. Used by
// scripts/screenshots.sh under Xvfb to produce docs/screenshots/.
//
// Sequence: wait for the model to load → start the server on a free loopback port → send two chat
// messages from the Chat page → keep `kConcurrency` API requests (sharing a system prompt, so the
// prefix cache shows hits) in flight against the server → after the chat replies and `kTrafficMs`
// of traffic, grab Models, Chat, Serve and Dashboard, then Chat and Dashboard again with the dark
// palette (chat-dark.png, dashboard-dark.png). Then the quantization wizard on the model: each
// step (quantize-goal.png, quantize-output.png, quantize-run.png, quantize-done.png, a Q8_0 written
// to a temporary folder), a Q4_0 beside it, and the Compare tab measuring the three
// (compare.png) → stop.
#pragma once

#include <QObject>
#include <QString>
#include <QTemporaryDir>
#include <QTimer>

class QNetworkAccessManager;

namespace lathe::ui {

class EngineBridge;
class MainWindow;

class ScreenshotTour : public QObject {
  Q_OBJECT
 public:
  static constexpr int kConcurrency = 6;
  static constexpr int kTrafficMs = 25000;

  ScreenshotTour(MainWindow* window, EngineBridge* bridge, const QString& outputDir,
                 QObject* parent = nullptr);

 signals:
  // Every screenshot is written (ok) or the tour gave up (message says why).
  void finished(bool ok, const QString& message);

 private:
  void onLoaded();
  void onServerStarted(const QString& url);
  void sendRequest();
  bool sendNextChatMessage();  // false when every chat message was sent
  void maybeCapture();
  void capture();
  bool grabPage(int page, const QString& name);
  bool grabWidget(QWidget* widget, const QString& name);
  // The wizard's steps and the Compare tab; false after fail().
  bool captureQuantizeAndCompare();
  void fail(const QString& message);

  MainWindow* m_window;
  EngineBridge* m_bridge;
  QString m_dir;
  QString m_url;
  QNetworkAccessManager* m_network = nullptr;
  QTimer m_trafficTimer;
  QTimer m_timeout;
  int m_requestsSent = 0;
  int m_chatSent = 0;
  int m_inFlight = 0;
  bool m_chatDone = false;
  bool m_trafficDone = false;
  bool m_capturing = false;
  bool m_stopped = false;
  bool m_trafficOff = false;
  QTemporaryDir m_outputs;  // the wizard's outputs
};

}  // namespace lathe::ui
