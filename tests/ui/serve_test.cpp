// The Serve page with the real engine (CPU backend, default model) and the real OpenAI-compatible
// server: started from the page, it answers the test's own HTTP request, which then appears in the
// live request log; the API key is enforced; a busy port is a readable error; binding beyond
// loopback without a key is warned about.
#include <QtTest>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLineEdit>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QTcpServer>

#include "test_support.h"
#include "ui/app/main_window.h"
#include "ui/bridge/engine_bridge.h"
#include "ui/common/message_banner.h"
#include "ui/serve/request_log_model.h"
#include "ui/serve/serve_panel.h"
#include "ui_test_support.h"

using namespace lathe::ui;

namespace {

struct HttpResult {
  int status = 0;
  QJsonObject json;
};

// POSTs a chat completion and waits for the answer while the event loop runs.
HttpResult postChat(QNetworkAccessManager& net, const QString& baseUrl, const QString& model,
                    const QString& apiKey = QString()) {
  QNetworkRequest request(QUrl(baseUrl + "/v1/chat/completions"));
  request.setHeader(QNetworkRequest::ContentTypeHeader, "application/json");
  if (!apiKey.isEmpty()) request.setRawHeader("Authorization", "Bearer " + apiKey.toUtf8());
  const QJsonObject body{
      {"model", model},
      {"messages", QJsonArray{QJsonObject{{"role", "user"}, {"content", "Say hi."}}}},
      {"max_tokens", 8},
      {"temperature", 0}};
  QNetworkReply* reply = net.post(request, QJsonDocument(body).toJson());
  QSignalSpy done(reply, &QNetworkReply::finished);
  done.wait(120000);
  HttpResult r;
  r.status = reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
  r.json = QJsonDocument::fromJson(reply->readAll()).object();
  reply->deleteLater();
  return r;
}

}  // namespace

class ServeTest : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;
  std::unique_ptr<EngineBridge> m_bridge;
  std::unique_ptr<MainWindow> m_window;
  QNetworkAccessManager m_net;

  ServePanel* serve() const { return m_window->serve(); }
  QPushButton* button(const char* name) const { return serve()->findChild<QPushButton*>(name); }

  bool startServer(const ServeSettings& s) {
    serve()->setSettings(s);
    QSignalSpy started(m_bridge.get(), &EngineBridge::serverStarted);
    QTest::mouseClick(button("startServer"), Qt::LeftButton);
    return started.wait(30000);
  }
  bool stopServer() {
    QSignalSpy stopped(m_bridge.get(), &EngineBridge::serverStopped);
    QTest::mouseClick(button("stopServer"), Qt::LeftButton);
    return stopped.wait(30000);
  }

 private slots:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    test::isolateSettings(m_dir);
    const QString model = QString::fromStdString(lathe::test::default_model_path());
    if (!QFile::exists(model)) QSKIP("default model missing: run scripts/fetch-default-model.sh");
    m_bridge = std::make_unique<EngineBridge>();
    m_window = std::make_unique<MainWindow>(m_bridge.get(), m_dir.filePath("conversations"));
    m_window->show();
    QVERIFY(QTest::qWaitForWindowExposed(m_window.get()));
    m_window->showPage(MainWindow::kServePage);
    QVERIFY(!button("startServer")->isEnabled());  // nothing to serve yet
    QSignalSpy loaded(m_bridge.get(), &EngineBridge::modelLoaded);
    m_window->openModel(model, /*load=*/true);
    QVERIFY(loaded.wait(120000));
    m_window->showPage(MainWindow::kServePage);
    QVERIFY(button("startServer")->isEnabled());
  }

  void cleanupTestCase() {
    m_window.reset();
    m_bridge.reset();
  }

  void serverAnswersAndLogsTheRequest() {
    ServeSettings s;
    s.host = "127.0.0.1";
    s.port = 0;  // any free port
    QVERIFY(startServer(s));
    const QString url = serve()->findChild<QLineEdit*>("serverUrl")->text();
    QVERIFY2(url.startsWith("http://127.0.0.1:"), qPrintable(url));
    QVERIFY(!url.endsWith(":0"));
    QVERIFY(!button("startServer")->isEnabled());
    // The copyable curl command targets this server and model.
    const QString curl = serve()->findChild<QPlainTextEdit*>("curlCommand")->toPlainText();
    QVERIFY(curl.contains(url + "/v1/chat/completions"));
    QVERIFY(curl.contains(m_bridge->servedModelName()));

    QSignalSpy logged(m_bridge.get(), &EngineBridge::requestLogged);
    test::ResponsivenessProbe probe;
    probe.start();
    const HttpResult r = postChat(m_net, url, m_bridge->servedModelName());
    probe.stop();
    QCOMPARE(r.status, 200);
    const QString id = r.json["id"].toString();
    QVERIFY(!id.isEmpty());
    const QJsonObject choice = r.json["choices"].toArray().at(0).toObject();
    QVERIFY(!choice["message"].toObject()["content"].toString().isEmpty());
    QVERIFY2(probe.maxGapMs() < 100,
             qPrintable(QString("event loop blocked %1 ms").arg(probe.maxGapMs())));

    // The request shows up in the log with the numbers the client got.
    QTRY_VERIFY_WITH_TIMEOUT(serve()->log()->rowCount() >= 1, 10000);
    const RequestLogEntry& e = serve()->log()->entry(serve()->log()->rowCount() - 1);
    QCOMPARE(e.id, id);
    QCOMPARE(e.httpStatus, 200);
    QCOMPARE(e.endpoint, QString("/v1/chat/completions"));
    QCOMPARE(e.promptTokens, r.json["usage"].toObject()["prompt_tokens"].toInt());
    QCOMPARE(e.completionTokens, r.json["usage"].toObject()["completion_tokens"].toInt());
    QCOMPARE(e.finishReason, choice["finish_reason"].toString());
    QVERIFY(e.ttftMs > 0);
    QVERIFY(stopServer());
    QVERIFY(serve()->findChild<QLineEdit*>("serverUrl")->text().isEmpty());
  }

  void apiKeyIsEnforced() {
    ServeSettings s;
    s.host = "127.0.0.1";
    s.port = 0;
    s.apiKey = "sk-lathe-test-key";
    QVERIFY(startServer(s));
    const QString url = m_bridge->serverUrl();
    QVERIFY(serve()->curlCommand().contains("Authorization: Bearer sk-lathe-test-key"));
    QCOMPARE(postChat(m_net, url, m_bridge->servedModelName()).status, 401);
    QCOMPARE(postChat(m_net, url, m_bridge->servedModelName(), "wrong").status, 401);
    QCOMPARE(postChat(m_net, url, m_bridge->servedModelName(), s.apiKey).status, 200);
    QTRY_VERIFY_WITH_TIMEOUT(serve()->log()->rowCount() >= 2, 10000);
    QVERIFY(stopServer());
  }

  void busyPortIsAReadableError() {
    QTcpServer squatter;
    QVERIFY(squatter.listen(QHostAddress::LocalHost, 0));
    ServeSettings s;
    s.host = "127.0.0.1";
    s.port = squatter.serverPort();
    serve()->setSettings(s);
    QSignalSpy failed(m_bridge.get(), &EngineBridge::serverFailed);
    QTest::mouseClick(button("startServer"), Qt::LeftButton);
    QVERIFY(failed.wait(30000));
    auto* banner = serve()->findChild<MessageBanner*>("serveError");
    QVERIFY2(banner->text().contains(QString::number(s.port)), qPrintable(banner->text()));
    QVERIFY(!m_bridge->isServing());
    QVERIFY(button("startServer")->isEnabled());  // the page stays usable
  }

  void warnsWhenExposedWithoutKey() {
    QVERIFY(ServePanel::isLoopbackHost("127.0.0.1"));
    QVERIFY(ServePanel::isLoopbackHost("127.8.9.10"));
    QVERIFY(ServePanel::isLoopbackHost("::1"));
    QVERIFY(ServePanel::isLoopbackHost("localhost"));
    QVERIFY(!ServePanel::isLoopbackHost("0.0.0.0"));
    QVERIFY(!ServePanel::isLoopbackHost("192.168.1.20"));
    auto* host = serve()->findChild<QLineEdit*>("host");
    auto* key = serve()->findChild<QLineEdit*>("apiKey");
    host->clear();
    key->clear();
    QTest::keyClicks(host, "0.0.0.0");
    QVERIFY(serve()->warning()->isVisible());
    QVERIFY(serve()->warning()->text().contains("0.0.0.0"));
    QTest::keyClicks(key, "secret");
    QVERIFY(!serve()->warning()->isVisible());
    key->clear();
    host->setText("127.0.0.1");
    QVERIFY(!serve()->warning()->isVisible());
  }
};

QTEST_MAIN(ServeTest)
#include "serve_test.moc"
