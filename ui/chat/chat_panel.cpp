#include "ui/chat/chat_panel.h"

#include <QGroupBox>
#include <QHBoxLayout>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLineEdit>
#include <QListView>
#include <QMenu>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QShortcut>
#include <QSplitter>
#include <QToolButton>
#include <QVBoxLayout>

#include "ui/bridge/engine_bridge.h"
#include "ui/chat/conversation_store.h"
#include "ui/chat/output_controls.h"
#include "ui/chat/sampling_controls.h"
#include "ui/chat/transcript_view.h"
#include "ui/common/message_banner.h"

namespace lathe::ui {

namespace {
QToolButton* toolButton(const QString& icon, const QString& text, const QString& tip) {
  auto* b = new QToolButton;
  b->setIcon(QIcon(icon));
  b->setText(text);
  b->setToolTip(tip);
  b->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
  b->setAutoRaise(true);
  return b;
}
}  // namespace

ChatPanel::ChatPanel(EngineBridge* bridge, ConversationStore* store, QWidget* parent)
    : QWidget(parent), m_bridge(bridge), m_store(store), m_conversation(Conversation::create()) {
  auto* root = new QHBoxLayout(this);
  auto* splitter = new QSplitter(Qt::Horizontal);
  root->addWidget(splitter);

  // Left: saved conversations.
  auto* left = new QWidget;
  auto* leftLayout = new QVBoxLayout(left);
  leftLayout->setContentsMargins(0, 0, 0, 0);
  auto* listBar = new QHBoxLayout;
  auto* newButton =
      toolButton(QStringLiteral(":/icons/new.svg"), tr("New chat"), tr("Start a new conversation"));
  newButton->setObjectName(QStringLiteral("newChat"));
  auto* renameButton = toolButton(QStringLiteral(":/icons/edit.svg"), QString(),
                                  tr("Rename the selected conversation (F2)"));
  auto* deleteButton = toolButton(QStringLiteral(":/icons/delete.svg"), QString(),
                                  tr("Delete the selected conversation"));
  listBar->addWidget(newButton);
  listBar->addStretch(1);
  listBar->addWidget(renameButton);
  listBar->addWidget(deleteButton);
  leftLayout->addLayout(listBar);
  m_list = new QListView;
  m_list->setObjectName(QStringLiteral("conversationList"));
  m_list->setModel(m_store);
  // Every rename (this panel's, or an edit of the list row) reaches the open conversation, so that
  // its next save keeps the new title.
  connect(m_store, &ConversationStore::renamed, this, [this](const QString& id, const QString& t) {
    if (id == m_conversation.id) m_conversation.title = t;
  });
  m_list->setEditTriggers(QAbstractItemView::EditKeyPressed | QAbstractItemView::SelectedClicked);
  m_list->setContextMenuPolicy(Qt::CustomContextMenu);
  m_list->setTextElideMode(Qt::ElideRight);
  m_list->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  m_list->setUniformItemSizes(true);
  leftLayout->addWidget(m_list, 1);
  splitter->addWidget(left);

  // Center: system prompt, transcript, input.
  auto* center = new QWidget;
  auto* centerLayout = new QVBoxLayout(center);
  centerLayout->setContentsMargins(0, 0, 0, 0);
  m_banner = new MessageBanner;
  m_banner->setObjectName(QStringLiteral("chatBanner"));
  centerLayout->addWidget(m_banner);
  // Conversation files set aside when the store first read the folder.
  if (!m_store->lastError().isEmpty())
    m_banner->showMessage(MessageBanner::Kind::kWarning, m_store->lastError());
  m_modelLabel = new QLabel;
  m_modelLabel->setObjectName(QStringLiteral("chatModel"));
  m_modelLabel->setForegroundRole(QPalette::PlaceholderText);
  centerLayout->addWidget(m_modelLabel);
  m_systemPrompt = new QPlainTextEdit;
  m_systemPrompt->setObjectName(QStringLiteral("systemPrompt"));
  m_systemPrompt->setPlaceholderText(
      tr("System prompt (optional): instructions the model follows "
         "for the whole conversation"));
  m_systemPrompt->setMaximumHeight(m_systemPrompt->fontMetrics().lineSpacing() * 4);
  centerLayout->addWidget(m_systemPrompt);

  m_findBar = new QWidget;
  auto* findLayout = new QHBoxLayout(m_findBar);
  findLayout->setContentsMargins(0, 0, 0, 0);
  m_findEdit = new QLineEdit;
  m_findEdit->setPlaceholderText(tr("Find in conversation"));
  m_findEdit->setClearButtonEnabled(true);
  auto* findPrev = new QToolButton;
  findPrev->setArrowType(Qt::UpArrow);
  auto* findNextButton = new QToolButton;
  findNextButton->setArrowType(Qt::DownArrow);
  auto* findClose = new QToolButton;
  findClose->setText(tr("Close"));
  findLayout->addWidget(m_findEdit, 1);
  findLayout->addWidget(findPrev);
  findLayout->addWidget(findNextButton);
  findLayout->addWidget(findClose);
  m_findBar->hide();
  centerLayout->addWidget(m_findBar);

  m_transcript = new TranscriptView;
  m_transcript->setObjectName(QStringLiteral("transcript"));
  centerLayout->addWidget(m_transcript, 1);

  m_editNotice = new QLabel;
  m_editNotice->setObjectName(QStringLiteral("editNotice"));
  m_editNotice->setWordWrap(true);
  m_editNotice->hide();
  centerLayout->addWidget(m_editNotice);

  m_input = new QPlainTextEdit;
  m_input->setObjectName(QStringLiteral("chatInput"));
  m_input->setPlaceholderText(tr("Message (Ctrl+Enter to send)"));
  m_input->setMaximumHeight(m_input->fontMetrics().lineSpacing() * 6);
  centerLayout->addWidget(m_input);
  auto* buttons = new QHBoxLayout;
  m_sendButton = new QPushButton(QIcon(QStringLiteral(":/icons/send.svg")), tr("Send"));
  m_sendButton->setObjectName(QStringLiteral("sendButton"));
  m_stopButton = new QPushButton(QIcon(QStringLiteral(":/icons/stop.svg")), tr("Stop"));
  m_stopButton->setObjectName(QStringLiteral("stopButton"));
  m_regenerateButton =
      new QPushButton(QIcon(QStringLiteral(":/icons/regenerate.svg")), tr("Regenerate"));
  m_regenerateButton->setObjectName(QStringLiteral("regenerateButton"));
  buttons->addStretch(1);
  buttons->addWidget(m_regenerateButton);
  buttons->addWidget(m_stopButton);
  buttons->addWidget(m_sendButton);
  centerLayout->addLayout(buttons);
  splitter->addWidget(center);

  // Right: sampling, then structured output and tools.
  auto* right = new QWidget;
  auto* rightLayout = new QVBoxLayout(right);
  rightLayout->setContentsMargins(0, 0, 0, 0);
  auto* samplingBox = new QGroupBox(tr("Sampling"));
  auto* samplingLayout = new QVBoxLayout(samplingBox);
  m_sampling = new SamplingControls;
  samplingLayout->addWidget(m_sampling);
  rightLayout->addWidget(samplingBox);
  auto* outputBox = new QGroupBox(tr("Output"));
  auto* outputLayout = new QVBoxLayout(outputBox);
  m_output = new OutputControls;
  outputLayout->addWidget(m_output);
  rightLayout->addWidget(outputBox);
  rightLayout->addStretch(1);
  splitter->addWidget(right);
  splitter->setStretchFactor(0, 1);
  splitter->setStretchFactor(1, 4);
  splitter->setStretchFactor(2, 1);
  splitter->setSizes({220, 800, 240});

  m_redrawTimer.setInterval(kRedrawMs);
  connect(&m_redrawTimer, &QTimer::timeout, this, &ChatPanel::redraw);

  connect(m_sendButton, &QPushButton::clicked, this, &ChatPanel::send);
  connect(m_stopButton, &QPushButton::clicked, this, &ChatPanel::stop);
  connect(m_regenerateButton, &QPushButton::clicked, this, &ChatPanel::regenerate);
  connect(newButton, &QToolButton::clicked, this, &ChatPanel::newConversation);
  connect(renameButton, &QToolButton::clicked, this, [this] {
    if (m_list->currentIndex().isValid()) m_list->edit(m_list->currentIndex());
  });
  connect(deleteButton, &QToolButton::clicked, this, &ChatPanel::askDeleteSelected);
  connect(m_list, &QListView::customContextMenuRequested, this, [this](const QPoint& pos) {
    const QModelIndex index = m_list->indexAt(pos);
    if (!index.isValid()) return;
    QMenu menu;
    menu.addAction(tr("Rename"), this, [this, index] { m_list->edit(index); });
    menu.addAction(tr("Delete"), this, &ChatPanel::askDeleteSelected);
    menu.exec(m_list->viewport()->mapToGlobal(pos));
  });
  connect(m_list->selectionModel(), &QItemSelectionModel::currentChanged, this,
          [this](const QModelIndex& index) {
            const QString id = index.data(ConversationStore::IdRole).toString();
            if (!id.isEmpty() && id != m_conversation.id) openConversation(id);
          });
  connect(m_transcript, &TranscriptView::editRequested, this, &ChatPanel::editMessage);
  connect(m_systemPrompt, &QPlainTextEdit::textChanged, this,
          [this] { m_conversation.systemPrompt = m_systemPrompt->toPlainText(); });
  connect(m_sampling, &SamplingControls::changed, this,
          [this](const SamplingSettings& s) { m_conversation.sampling = s; });
  connect(m_output, &OutputControls::changed, this,
          [this](const ChatOutputSettings& s) { m_conversation.output = s; });
  connect(m_output, &OutputControls::validityChanged, this, [this](bool ok) {
    m_outputOk = ok;
    updateButtons();
  });
  connect(m_findEdit, &QLineEdit::returnPressed, this, [this] { findNext(false); });
  connect(findNextButton, &QToolButton::clicked, this, [this] { findNext(false); });
  connect(findPrev, &QToolButton::clicked, this, [this] { findNext(true); });
  connect(findClose, &QToolButton::clicked, m_findBar, &QWidget::hide);

  auto* sendShortcut = new QShortcut(QKeySequence(Qt::CTRL | Qt::Key_Return), m_input);
  sendShortcut->setContext(Qt::WidgetShortcut);
  connect(sendShortcut, &QShortcut::activated, this, &ChatPanel::send);
  auto* stopShortcut = new QShortcut(QKeySequence(Qt::Key_Escape), this);
  stopShortcut->setContext(Qt::WidgetWithChildrenShortcut);
  connect(stopShortcut, &QShortcut::activated, this, [this] {
    if (isGenerating())
      stop();
    else if (m_findBar->isVisible())
      m_findBar->hide();
    else if (m_editIndex >= 0)
      cancelEdit();
  });

  connect(m_bridge, &EngineBridge::generationDelta, this, &ChatPanel::onDelta);
  connect(m_bridge, &EngineBridge::generationFinished, this, &ChatPanel::onFinished);
  connect(m_bridge, &EngineBridge::generationToolReply, this, &ChatPanel::onToolReply);
  connect(m_bridge, &EngineBridge::stateChanged, this, &ChatPanel::updateButtons);

  m_sampling->setSettings(m_conversation.sampling);
  m_output->setSettings(m_conversation.output);
  m_transcript->showConversation(m_conversation);
  updateButtons();
}

void ChatPanel::send() {
  const QString text = m_input->toPlainText().trimmed();
  if (text.isEmpty() || isGenerating()) return;
  if (!m_bridge->isLoaded()) {
    m_banner->showMessage(MessageBanner::Kind::kWarning,
                          tr("No model is loaded. Open one on the Models page and press Load."));
    return;
  }
  const ChatOutputProblem problem = m_output->problem();
  if (!problem.isOk()) {
    m_banner->showMessage(MessageBanner::Kind::kWarning,
                          tr("Fix the output settings first: %1").arg(problem.message));
    return;
  }
  m_banner->clear();
  if (m_editIndex < 0 && m_conversation.unansweredToolCall() != nullptr) {
    sendToolResult(text);
    return;
  }
  if (m_editIndex >= 0 && m_editIndex < m_conversation.messages.size())
    m_conversation.messages.resize(m_editIndex);  // the edited message and everything after it
  cancelEdit();
  m_conversation.messages.push_back({QStringLiteral("user"), text, std::nullopt});
  if (m_conversation.title.isEmpty()) {
    const QString simple = text.simplified();
    m_conversation.title = simple.size() > 50 ? simple.left(49) + QStringLiteral("…") : simple;
  }
  m_input->clear();
  startGeneration();
}

void ChatPanel::sendToolResult(const QString& text) {
  const ChatToolCall* call = m_conversation.unansweredToolCall();
  ChatMessage result{QStringLiteral("tool"), text, std::nullopt};
  result.toolCallId = call->id;
  result.toolName = call->name;
  m_conversation.messages.push_back(result);
  m_input->clear();
  if (m_conversation.unansweredToolCall() != nullptr) {
    // More calls to answer first.
    m_conversation.updated = QDateTime::currentDateTimeUtc();
    saveConversation();
    m_transcript->showConversation(m_conversation);
    updateButtons();
    return;
  }
  startGeneration();
}

void ChatPanel::startGeneration() {
  GenerationRequest request;
  request.messages = m_conversation.turns();
  request.sampling = m_sampling->settings();
  request.output = m_output->settings();
  m_conversation.sampling = request.sampling;
  m_conversation.output = request.output;
  m_toolReply.reset();
  m_conversation.modelName = m_bridge->loadedModel().name;
  m_streamText.clear();
  m_dirty = false;
  m_transcript->showConversation(m_conversation);
  m_transcript->beginStreaming();
  m_ticket = m_bridge->generate(request);
  m_redrawTimer.start();
  updateButtons();
}

void ChatPanel::onDelta(quint64 ticket, const QString& text) {
  if (ticket != m_ticket) return;
  m_streamText += text;
  m_dirty = true;  // drawn by the timer
}

void ChatPanel::redraw() {
  if (!m_dirty) return;
  m_dirty = false;
  m_transcript->setStreamingText(m_streamText);
}

void ChatPanel::onFinished(quint64 ticket, const GenerationStats& stats) {
  if (ticket != m_ticket) return;
  m_redrawTimer.stop();
  m_ticket = 0;
  if (!stats.error.isEmpty())
    m_banner->showMessage(MessageBanner::Kind::kError, tr("The reply failed: %1").arg(stats.error));
  ChatMessage reply{QStringLiteral("assistant"), m_streamText, stats};
  if (m_toolReply) {
    reply.content = m_toolReply->content;
    reply.toolCalls = m_toolReply->calls;
    m_toolReply.reset();
  }
  if (!reply.content.isEmpty() || !reply.toolCalls.isEmpty() || stats.error.isEmpty())
    m_conversation.messages.push_back(reply);
  m_streamText.clear();
  m_conversation.updated = QDateTime::currentDateTimeUtc();
  saveConversation();
  m_transcript->showConversation(m_conversation);
  updateButtons();
  emit replyFinished(stats);
}

void ChatPanel::onToolReply(quint64 ticket, const ChatToolReply& reply) {
  if (ticket == m_ticket) m_toolReply = reply;
}

void ChatPanel::stop() {
  if (isGenerating()) m_bridge->cancelGeneration(m_ticket);
}

void ChatPanel::regenerate() {
  if (isGenerating() || !m_bridge->isLoaded()) return;
  if (!m_conversation.messages.isEmpty() &&
      m_conversation.messages.back().role == QLatin1String("assistant"))
    m_conversation.messages.removeLast();
  if (m_conversation.messages.isEmpty() ||
      (m_conversation.messages.back().role != QLatin1String("user") &&
       m_conversation.messages.back().role != QLatin1String("tool")))
    return;
  startGeneration();
}

void ChatPanel::editMessage(int index) {
  if (isGenerating() || index < 0 || index >= m_conversation.messages.size() ||
      m_conversation.messages[index].role != QLatin1String("user"))
    return;
  m_editIndex = index;
  m_input->setPlainText(m_conversation.messages[index].content);
  m_input->setFocus();
  m_editNotice->setText(tr("Editing message %1: Send replaces it and every message after it "
                           "(Esc cancels).")
                            .arg(index + 1));
  m_editNotice->show();
}

void ChatPanel::cancelEdit() {
  m_editIndex = -1;
  m_editNotice->hide();
}

void ChatPanel::detachGeneration() {
  if (!isGenerating()) return;
  // Leaving the conversation mid-reply: stop the request and keep what was written so far.
  m_bridge->cancelGeneration(m_ticket);
  m_ticket = 0;
  m_redrawTimer.stop();
  if (!m_streamText.isEmpty()) {
    GenerationStats stats;
    stats.finishReason = QStringLiteral("abort");
    m_conversation.messages.push_back({QStringLiteral("assistant"), m_streamText, stats});
    m_conversation.updated = QDateTime::currentDateTimeUtc();
    saveConversation();
  }
  m_streamText.clear();
}

void ChatPanel::newConversation() {
  detachGeneration();
  cancelEdit();
  m_conversation = Conversation::create();
  m_conversation.systemPrompt = m_systemPrompt->toPlainText();
  m_conversation.sampling = m_sampling->settings();
  m_conversation.output = m_output->settings();
  m_list->clearSelection();
  m_list->setCurrentIndex(QModelIndex());
  m_transcript->showConversation(m_conversation);
  m_input->setFocus();
  updateButtons();
}

bool ChatPanel::openConversation(const QString& id) {
  Conversation c;
  if (!m_store->load(id, &c)) {
    m_banner->showMessage(MessageBanner::Kind::kError, m_store->lastError());
    return false;
  }
  detachGeneration();
  cancelEdit();
  m_conversation = c;
  m_systemPrompt->blockSignals(true);
  m_systemPrompt->setPlainText(c.systemPrompt);
  m_systemPrompt->blockSignals(false);
  m_sampling->setSettings(c.sampling);
  m_output->setSettings(c.output);
  m_transcript->showConversation(c);
  const int row = m_store->indexOf(id);
  if (row >= 0 && m_list->currentIndex().row() != row) m_list->setCurrentIndex(m_store->index(row));
  updateButtons();
  return true;
}

bool ChatPanel::renameConversation(const QString& id, const QString& title) {
  return m_store->rename(id, title);
}

bool ChatPanel::deleteConversation(const QString& id) {
  const bool wasOpen = id == m_conversation.id;
  const int row = m_store->indexOf(id);
  // The list would move its current row by itself; decide here what opens instead.
  m_list->selectionModel()->blockSignals(true);
  const bool removed = m_store->remove(id);
  m_list->selectionModel()->blockSignals(false);
  if (!removed) {
    m_banner->showMessage(MessageBanner::Kind::kError, m_store->lastError());
    return false;
  }
  if (wasOpen) {
    m_conversation.messages.clear();  // nothing of it may be saved again
    // Like a mail client: the neighbour opens, or a new chat when none is left.
    const QString next = m_store->idAt(qMin(row, m_store->rowCount() - 1));
    if (next.isEmpty() || !openConversation(next)) newConversation();
  }
  return true;
}

void ChatPanel::askDeleteSelected() {
  const QString id = m_list->currentIndex().data(ConversationStore::IdRole).toString();
  if (id.isEmpty()) return;
  const QString title = m_list->currentIndex().data(Qt::DisplayRole).toString();
  if (QMessageBox::question(this, tr("Delete conversation"),
                            tr("Delete \"%1\"? This cannot be undone.").arg(title)) ==
      QMessageBox::Yes)
    deleteConversation(id);
}

void ChatPanel::saveConversation() {
  if (m_conversation.messages.isEmpty()) return;
  // Saving moves the conversation's row to the top; were the list told, its current row would
  // move to a neighbour, which would open that conversation instead.
  m_list->selectionModel()->blockSignals(true);
  const bool saved = m_store->save(m_conversation);
  if (saved) m_list->setCurrentIndex(m_store->index(m_store->indexOf(m_conversation.id)));
  m_list->selectionModel()->blockSignals(false);
  if (!saved)
    m_banner->showMessage(MessageBanner::Kind::kError,
                          tr("Could not save the conversation: %1").arg(m_store->lastError()));
}

void ChatPanel::updateButtons() {
  const bool loaded = m_bridge->isLoaded();
  const bool generating = isGenerating();
  m_sendButton->setEnabled(loaded && !generating && m_outputOk);
  m_sendButton->setToolTip(m_outputOk ? QString() : m_output->problem().message);
  m_stopButton->setEnabled(generating);
  // After a reply that called tools, the input answers the first unanswered call.
  const ChatToolCall* call = m_conversation.unansweredToolCall();
  m_sendButton->setText(call != nullptr ? tr("Send result") : tr("Send"));
  m_input->setPlaceholderText(
      call != nullptr ? tr("Result of %1 (call %2), e.g. JSON; Ctrl+Enter sends it as a tool "
                           "message")
                            .arg(call->name, call->id)
                      : tr("Message (Ctrl+Enter to send)"));
  m_regenerateButton->setEnabled(loaded && !generating && !m_conversation.messages.isEmpty());
  m_transcript->setPlaceholderText(
      loaded ? tr("Type a message below and press Ctrl+Enter.")
             : tr("Messages appear here. Load a model on the Models page to start."));
  m_modelLabel->setText(
      loaded
          ? tr("Chatting with %1 on %2").arg(m_bridge->loadedModel().name, m_bridge->loadedDevice())
          : tr("No model loaded."));
}

void ChatPanel::setSystemPrompt(const QString& prompt) {
  m_systemPrompt->setPlainText(prompt);
}

void ChatPanel::startFind() {
  m_findBar->show();
  m_findEdit->setFocus();
  m_findEdit->selectAll();
}

void ChatPanel::findNext(bool backwards) {
  const QString needle = m_findEdit->text();
  if (needle.isEmpty()) return;
  const auto flags = backwards ? QTextDocument::FindBackward : QTextDocument::FindFlags();
  if (!m_transcript->find(needle, flags)) {
    // Wrap around once.
    QTextCursor c = m_transcript->textCursor();
    c.movePosition(backwards ? QTextCursor::End : QTextCursor::Start);
    m_transcript->setTextCursor(c);
    m_transcript->find(needle, flags);
  }
}

}  // namespace lathe::ui
