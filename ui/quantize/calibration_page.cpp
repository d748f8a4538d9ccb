#include "ui/quantize/calibration_page.h"

#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QRadioButton>
#include <QSpinBox>
#include <QStandardPaths>
#include <QVBoxLayout>

#include "ui/chat/conversation_export.h"
#include "ui/chat/conversation_store.h"
#include "ui/common/message_banner.h"

namespace lathe::ui {

CalibrationPage::CalibrationPage(QWidget* parent) : QWizardPage(parent) {
  setTitle(tr("Step 2 — Calibration"));
  setSubTitle(
      tr("GPTQ and AWQ choose each weight by watching the model read some text. Text like "
         "what the model will see works best; the built-in set mixes languages, code and "
         "maths."));
  auto* page = new QVBoxLayout(this);
  m_banner = new MessageBanner;
  m_banner->setObjectName(QStringLiteral("calibrationBanner"));
  page->addWidget(m_banner);
  auto* form = new QFormLayout;
  page->addLayout(form);
  page->addStretch(1);
  m_builtin = new QRadioButton(tr("Built-in set (calibration.txt)"));
  m_builtin->setObjectName(QStringLiteral("calibrationBuiltin"));
  m_builtin->setChecked(true);
  m_fromFile = new QRadioButton(tr("A file:"));
  m_fromFile->setToolTip(
      tr("Plain UTF-8 text, JSONL ({\"messages\": […]}, {\"text\": …}) or "
         "ShareGPT JSON; conversations are rendered with the chat template."));
  m_file = new QLineEdit;
  m_file->setObjectName(QStringLiteral("calibrationFile"));
  auto* browse = new QPushButton(tr("Browse…"));
  auto* fileRow = new QHBoxLayout;
  fileRow->addWidget(m_fromFile);
  fileRow->addWidget(m_file, 1);
  fileRow->addWidget(browse);
  m_fromConversations = new QRadioButton;
  m_fromConversations->setObjectName(QStringLiteral("calibrationConversations"));
  m_conversationsNote = new QLabel;
  m_conversationsNote->setObjectName(QStringLiteral("calibrationConversationsNote"));
  m_conversationsNote->setWordWrap(true);
  m_conversationsNote->setEnabled(false);  // the palette's secondary text
  auto* source = new QVBoxLayout;
  source->addWidget(m_builtin);
  source->addLayout(fileRow);
  source->addWidget(m_fromConversations);
  source->addWidget(m_conversationsNote);
  form->addRow(tr("Text:"), source);
  m_samples = new QSpinBox;
  m_samples->setObjectName(QStringLiteral("calibrationSamples"));
  m_samples->setRange(1, 4096);
  m_samples->setValue(128);
  m_samples->setToolTip(
      tr("Sequences run through the model (128 is the usual choice; fewer is "
         "faster and a little less accurate)."));
  form->addRow(tr("Samples:"), m_samples);
  m_tokens = new QSpinBox;
  m_tokens->setObjectName(QStringLiteral("calibrationTokens"));
  m_tokens->setRange(16, 8192);
  m_tokens->setValue(512);
  m_tokens->setSuffix(tr(" tokens each"));
  form->addRow(tr("Length:"), m_tokens);
  connect(browse, &QPushButton::clicked, this, [this] {
    const QString path =
        QFileDialog::getOpenFileName(this, tr("Calibration text"), QString(),
                                     tr("Text or chats (*.txt *.jsonl *.json);;All files (*)"));
    if (!path.isEmpty()) setFile(path);
  });
  connect(m_file, &QLineEdit::textEdited, this, [this] { m_fromFile->setChecked(true); });
  for (QRadioButton* b : {m_builtin, m_fromFile, m_fromConversations})
    connect(b, &QRadioButton::toggled, m_banner, &MessageBanner::clear);
  updateConversations();
}

QString CalibrationPage::conversationsCalibrationPath() {
  return QStandardPaths::writableLocation(QStandardPaths::CacheLocation) +
         QStringLiteral("/calibration/saved-conversations.jsonl");
}

void CalibrationPage::setConversations(ConversationStore* store) {
  if (m_store != nullptr) disconnect(m_store, nullptr, this, nullptr);
  m_store = store;
  if (store != nullptr) {
    for (auto signal : {&ConversationStore::rowsInserted, &ConversationStore::rowsRemoved})
      connect(store, signal, this, &CalibrationPage::updateConversations);
    connect(store, &ConversationStore::modelReset, this, &CalibrationPage::updateConversations);
    connect(store, &QObject::destroyed, this, [this] {
      m_store = nullptr;
      updateConversations();
    });
  }
  updateConversations();
}

int CalibrationPage::conversationCount() const {
  return m_store != nullptr ? m_store->rowCount() : 0;
}

QString CalibrationPage::conversationsNote() const {
  return m_conversationsNote->text();
}

void CalibrationPage::updateConversations() {
  const int n = conversationCount();
  m_fromConversations->setText(tr("My saved conversations (%n)", nullptr, n));
  m_fromConversations->setEnabled(n > 0);
  m_conversationsNote->setText(
      n > 0 ? tr("The chats saved on the Chat page, rendered with this model's chat template: "
                 "calibration on what you actually ask it.")
            : tr("No saved conversations yet: every chat on the Chat page is saved; after a few "
                 "they can calibrate the model here."));
  if (n == 0 && m_fromConversations->isChecked()) m_builtin->setChecked(true);
}

bool CalibrationPage::useConversations() {
  if (!m_fromConversations->isEnabled()) return false;
  m_fromConversations->setChecked(true);
  return true;
}

void CalibrationPage::setFile(const QString& path) {
  m_file->setText(path);
  (path.isEmpty() ? m_builtin : m_fromFile)->setChecked(true);
}

void CalibrationPage::setSize(int samples, int tokens) {
  m_samples->setValue(samples);
  m_tokens->setValue(tokens);
}

void CalibrationPage::apply(QuantizeSpec* spec) const {
  spec->calibrationFile = m_fromFile->isChecked()            ? m_file->text().trimmed()
                          : m_fromConversations->isChecked() ? conversationsCalibrationPath()
                                                             : QString();
  spec->calibrationSamples = m_samples->value();
  spec->calibrationSeqLen = m_tokens->value();
}

bool CalibrationPage::validatePage() {
  // The library checks the contents; here only that a chosen file exists, or that the
  // conversations could be written.
  m_banner->clear();
  if (m_fromFile->isChecked() && !QFileInfo(m_file->text().trimmed()).isFile()) {
    m_banner->showMessage(MessageBanner::Kind::kError,
                          m_file->text().trimmed().isEmpty()
                              ? tr("Choose a calibration file (Browse…), or another source.")
                              : tr("%1 is not a file. Choose a text, JSONL or ShareGPT file.")
                                    .arg(m_file->text().trimmed()));
    return false;
  }
  if (m_fromConversations->isChecked()) {
    QString error;
    int written = 0;
    if (m_store == nullptr || !exportConversationsAsChatJsonl(
                                  m_store, conversationsCalibrationPath(), &written, &error)) {
      m_banner->showMessage(
          MessageBanner::Kind::kError,
          m_store == nullptr ? tr("No saved conversations are available.") : error);
      return false;
    }
  }
  return true;
}

}  // namespace lathe::ui
