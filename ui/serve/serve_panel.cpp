#include "ui/serve/serve_panel.h"

#include <QAction>
#include <QApplication>
#include <QClipboard>
#include <QFontDatabase>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QHostAddress>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QRandomGenerator>
#include <QScrollBar>
#include <QSettings>
#include <QSortFilterProxyModel>
#include <QSpinBox>
#include <QTableView>
#include <QToolButton>
#include <QVBoxLayout>

#include "ui/bridge/engine_bridge.h"
#include "ui/common/message_banner.h"
#include "ui/serve/request_log_model.h"

namespace lathe::ui {

namespace {

QToolButton* copyButton(const QString& tip) {
  auto* b = new QToolButton;
  b->setIcon(QIcon(QStringLiteral(":/icons/copy.svg")));
  b->setText(QObject::tr("Copy"));
  b->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
  b->setToolTip(tip);
  return b;
}

QString shellQuote(const QString& s) {
  QString out = s;
  out.replace(QLatin1Char('\''), QStringLiteral("'\\''"));
  return QLatin1Char('\'') + out + QLatin1Char('\'');
}

}  // namespace

bool ServePanel::isLoopbackHost(const QString& host) {
  const QString h = host.trimmed().toLower();
  if (h == QLatin1String("localhost")) return true;
  const QHostAddress address(h);
  return !address.isNull() && address.isLoopback();
}

ServePanel::ServePanel(EngineBridge* bridge, QWidget* parent) : QWidget(parent), m_bridge(bridge) {
  auto* root = new QVBoxLayout(this);
  m_error = new MessageBanner;
  m_error->setObjectName(QStringLiteral("serveError"));
  root->addWidget(m_error);
  m_warning = new MessageBanner;
  m_warning->setObjectName(QStringLiteral("serveWarning"));
  root->addWidget(m_warning);

  auto* top = new QHBoxLayout;
  auto* configBox = new QGroupBox(tr("Server"));
  auto* form = new QFormLayout(configBox);
  m_host = new QLineEdit;
  m_host->setObjectName(QStringLiteral("host"));
  m_host->setToolTip(tr("127.0.0.1 serves this computer only; 0.0.0.0 serves the whole network."));
  m_port = new QSpinBox;
  m_port->setObjectName(QStringLiteral("port"));
  m_port->setRange(0, 65535);
  m_port->setSpecialValueText(tr("any free port"));
  auto* keyRow = new QHBoxLayout;
  m_apiKey = new QLineEdit;
  m_apiKey->setObjectName(QStringLiteral("apiKey"));
  m_apiKey->setEchoMode(QLineEdit::Password);
  m_apiKey->setPlaceholderText(tr("none: anyone who can reach the port may use it"));
  QAction* reveal =
      m_apiKey->addAction(QIcon(QStringLiteral(":/icons/show.svg")), QLineEdit::TrailingPosition);
  reveal->setToolTip(tr("Show or hide the key"));
  connect(reveal, &QAction::triggered, this, [this] {
    m_apiKey->setEchoMode(m_apiKey->echoMode() == QLineEdit::Password ? QLineEdit::Normal
                                                                      : QLineEdit::Password);
  });
  auto* generate = new QPushButton(tr("Generate"));
  generate->setToolTip(tr("Fill in a random key"));
  keyRow->addWidget(m_apiKey, 1);
  keyRow->addWidget(generate);
  form->addRow(tr("Host:"), m_host);
  form->addRow(tr("Port:"), m_port);
  form->addRow(tr("API key:"), keyRow);
  auto* buttons = new QHBoxLayout;
  m_startButton = new QPushButton(QIcon(QStringLiteral(":/icons/start.svg")), tr("Start server"));
  m_startButton->setObjectName(QStringLiteral("startServer"));
  m_stopButton = new QPushButton(QIcon(QStringLiteral(":/icons/stop.svg")), tr("Stop server"));
  m_stopButton->setObjectName(QStringLiteral("stopServer"));
  buttons->addWidget(m_startButton);
  buttons->addWidget(m_stopButton);
  buttons->addStretch(1);
  form->addRow(buttons);
  m_status = new QLabel;
  m_status->setObjectName(QStringLiteral("serveStatus"));
  m_status->setWordWrap(true);
  form->addRow(m_status);
  top->addWidget(configBox, 1);

  auto* useBox = new QGroupBox(tr("Use it"));
  auto* useLayout = new QVBoxLayout(useBox);
  auto* urlRow = new QHBoxLayout;
  m_url = new QLineEdit;
  m_url->setObjectName(QStringLiteral("serverUrl"));
  m_url->setReadOnly(true);
  m_url->setPlaceholderText(tr("not running"));
  auto* copyUrl = copyButton(tr("Copy the base URL (for OpenAI clients: base_url = URL + /v1)"));
  urlRow->addWidget(new QLabel(tr("URL:")));
  urlRow->addWidget(m_url, 1);
  urlRow->addWidget(copyUrl);
  useLayout->addLayout(urlRow);
  m_curl = new QPlainTextEdit;
  m_curl->setObjectName(QStringLiteral("curlCommand"));
  m_curl->setReadOnly(true);
  m_curl->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  m_curl->setMaximumHeight(m_curl->fontMetrics().lineSpacing() * 7);
  auto* copyCurl = copyButton(tr("Copy the curl command"));
  copyCurl->setObjectName(QStringLiteral("copyCurl"));
  useLayout->addWidget(m_curl);
  auto* curlRow = new QHBoxLayout;
  curlRow->addStretch(1);
  curlRow->addWidget(copyCurl);
  useLayout->addLayout(curlRow);
  top->addWidget(useBox, 2);
  root->addLayout(top);

  auto* logBar = new QHBoxLayout;
  logBar->addWidget(new QLabel(QStringLiteral("<b>%1</b>").arg(tr("Request log"))));
  m_summary = new QLabel;
  m_summary->setObjectName(QStringLiteral("logSummary"));
  logBar->addWidget(m_summary, 1);
  m_filter = new QLineEdit;
  m_filter->setObjectName(QStringLiteral("logFilter"));
  m_filter->setPlaceholderText(tr("Filter (Ctrl+F)"));
  m_filter->setClearButtonEnabled(true);
  auto* clearLog = new QPushButton(tr("Clear"));
  logBar->addWidget(m_filter);
  logBar->addWidget(clearLog);
  root->addLayout(logBar);

  m_log = new RequestLogModel(10000, this);
  m_proxy = new QSortFilterProxyModel(this);
  m_proxy->setSourceModel(m_log);
  m_proxy->setFilterKeyColumn(-1);
  m_proxy->setFilterCaseSensitivity(Qt::CaseInsensitive);
  m_proxy->setSortRole(Qt::UserRole);
  m_table = new QTableView;
  m_table->setObjectName(QStringLiteral("requestLog"));
  m_table->setModel(m_proxy);
  m_table->setSortingEnabled(true);
  m_table->sortByColumn(RequestLogModel::kTime, Qt::AscendingOrder);
  m_table->verticalHeader()->hide();
  m_table->verticalHeader()->setDefaultSectionSize(m_table->fontMetrics().height() + 6);
  m_table->setWordWrap(false);
  m_table->setTextElideMode(Qt::ElideMiddle);
  QHeaderView* header = m_table->horizontalHeader();
  header->setSectionResizeMode(QHeaderView::ResizeToContents);
  header->setSectionResizeMode(RequestLogModel::kId, QHeaderView::Stretch);
  header->setStretchLastSection(false);
  m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_table->setAlternatingRowColors(true);
  root->addWidget(m_table, 1);

  QSettings s;
  ServeSettings saved;
  saved.host = s.value(QStringLiteral("serve/host"), saved.host).toString();
  saved.port = s.value(QStringLiteral("serve/port"), saved.port).toInt();
  setSettings(saved);  // the API key is never stored

  connect(m_startButton, &QPushButton::clicked, this, &ServePanel::start);
  connect(m_stopButton, &QPushButton::clicked, this, &ServePanel::stop);
  connect(generate, &QPushButton::clicked, this, [this] {
    QString key = QStringLiteral("sk-lathe-");
    for (int i = 0; i < 32; ++i)
      key += QLatin1Char("0123456789abcdef"[QRandomGenerator::system()->bounded(16)]);
    m_apiKey->setText(key);
  });
  connect(copyUrl, &QToolButton::clicked, this,
          [this] { QApplication::clipboard()->setText(m_url->text()); });
  connect(copyCurl, &QToolButton::clicked, this,
          [this] { QApplication::clipboard()->setText(curlCommand()); });
  connect(clearLog, &QPushButton::clicked, m_log, &RequestLogModel::clear);
  connect(m_filter, &QLineEdit::textChanged, m_proxy, &QSortFilterProxyModel::setFilterFixedString);
  for (QLineEdit* e : {m_host, m_apiKey})
    connect(e, &QLineEdit::textChanged, this, &ServePanel::updateWarning);
  connect(m_port, &QSpinBox::valueChanged, this, &ServePanel::updateState);

  connect(m_bridge, &EngineBridge::stateChanged, this, &ServePanel::updateState);
  connect(m_bridge, &EngineBridge::serverStarted, this, [this](const QString&) {
    m_error->clear();
    updateState();
  });
  connect(m_bridge, &EngineBridge::serverFailed, this, [this](const QString& message) {
    m_error->showMessage(MessageBanner::Kind::kError,
                         tr("The server did not start: %1").arg(message));
    updateState();
  });
  connect(m_bridge, &EngineBridge::serverStopped, this, &ServePanel::updateState);
  connect(m_bridge, &EngineBridge::requestLogged, this, [this](const RequestLogEntry& entry) {
    const bool atBottom =
        m_table->verticalScrollBar()->value() >= m_table->verticalScrollBar()->maximum() - 2;
    m_log->append(entry);
    if (atBottom) m_table->scrollToBottom();
    m_summary->setText(tr("%n requests", nullptr, m_log->rowCount()));
  });
  updateState();
}

ServeSettings ServePanel::settings() const {
  ServeSettings s;
  s.host = m_host->text().trimmed();
  s.port = m_port->value();
  s.apiKey = m_apiKey->text().trimmed();
  return s;
}

void ServePanel::setSettings(const ServeSettings& s) {
  m_host->setText(s.host);
  m_port->setValue(s.port);
  m_apiKey->setText(s.apiKey);
  updateWarning();
}

bool ServePanel::isExposedWithoutKey() const {
  const ServeSettings s = settings();
  return !isLoopbackHost(s.host) && s.apiKey.isEmpty();
}

void ServePanel::updateWarning() {
  if (isExposedWithoutKey())
    m_warning->showMessage(
        MessageBanner::Kind::kWarning,
        tr("%1 is reachable from other computers and no API key is set: anyone on the network can "
           "use this model. Set an API key, or use 127.0.0.1.")
            .arg(settings().host.isEmpty() ? tr("This address") : settings().host),
        false);
  else
    m_warning->clear();
  updateState();
}

QString ServePanel::curlCommand() const {
  QString base = m_bridge->serverUrl();
  if (base.isEmpty()) {
    const ServeSettings s = settings();
    base = QStringLiteral("http://%1:%2")
               .arg(s.host.contains(u':') ? u'[' + s.host + u']' : s.host)
               .arg(s.port);
  }
  // A wildcard bind is reached through loopback from this machine.
  base.replace(QStringLiteral("//0.0.0.0:"), QStringLiteral("//127.0.0.1:"));
  base.replace(QStringLiteral("//[::]:"), QStringLiteral("//[::1]:"));
  const QString model =
      m_bridge->isLoaded() ? m_bridge->servedModelName() : QStringLiteral("MODEL");
  const QString body = QStringLiteral(
                           "{\"model\": \"%1\", \"messages\": [{\"role\": \"user\", \"content\": "
                           "\"Write a haiku about lathes.\"}], \"max_tokens\": 64}")
                           .arg(model);
  QString cmd =
      QStringLiteral("curl %1/v1/chat/completions \\\n  -H 'Content-Type: application/json' \\\n")
          .arg(base);
  const QString key = settings().apiKey;
  if (!key.isEmpty())
    cmd += QStringLiteral("  -H %1 \\\n")
               .arg(shellQuote(QStringLiteral("Authorization: Bearer ") + key));
  cmd += QStringLiteral("  -d %1").arg(shellQuote(body));
  return cmd;
}

void ServePanel::updateState() {
  const bool loaded = m_bridge->isLoaded();
  const bool serving = m_bridge->isServing();
  m_startButton->setEnabled(loaded && !serving);
  m_stopButton->setEnabled(serving);
  for (QWidget* w : {static_cast<QWidget*>(m_host), static_cast<QWidget*>(m_port),
                     static_cast<QWidget*>(m_apiKey)})
    w->setEnabled(!serving);
  m_url->setText(serving ? m_bridge->serverUrl() : QString());
  if (serving)
    m_status->setText(
        tr("Serving %1 at %2").arg(m_bridge->servedModelName(), m_bridge->serverUrl()));
  else if (!loaded)
    m_status->setText(tr("Load a model on the Models page to serve it."));
  else
    m_status->setText(tr("Stopped."));
  m_curl->setPlainText(curlCommand());
}

void ServePanel::saveSettings() const {
  QSettings s;
  s.setValue(QStringLiteral("serve/host"), settings().host);
  s.setValue(QStringLiteral("serve/port"), settings().port);
}

void ServePanel::start() {
  if (!m_bridge->isLoaded() || m_bridge->isServing()) return;
  const ServeSettings s = settings();
  if (s.host.isEmpty()) {
    m_error->showMessage(MessageBanner::Kind::kError,
                         tr("Enter a host to listen on, e.g. 127.0.0.1."));
    return;
  }
  m_error->clear();
  saveSettings();
  m_status->setText(tr("Starting…"));
  m_startButton->setEnabled(false);
  m_bridge->startServer(s);
}

void ServePanel::stop() {
  m_bridge->stopServer();
}

void ServePanel::startFind() {
  m_filter->setFocus();
  m_filter->selectAll();
}

}  // namespace lathe::ui
