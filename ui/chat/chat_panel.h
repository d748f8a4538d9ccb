// The Chat page: a streaming chat with the loaded model through its chat template, with a system
// prompt, sampling controls, stop, regenerate, edit-and-resend, and saved conversations (open,
// rename, delete). Tokens arriving from the bridge are buffered and drawn by a timer (every
// kRedrawMs), never per token, so fast streams stay smooth and the event loop stays free.
#pragma once

#include <QTimer>
#include <QWidget>

#include <optional>

#include "ui/chat/conversation.h"

class QLabel;
class QLineEdit;
class QListView;
class QPlainTextEdit;
class QPushButton;
class QToolButton;

namespace lathe::ui {

class ConversationStore;
class EngineBridge;
class MessageBanner;
class OutputControls;
class SamplingControls;
class TranscriptView;

class ChatPanel : public QWidget {
  Q_OBJECT
 public:
  static constexpr int kRedrawMs = 50;

  // Not owned; both must outlive the panel.
  ChatPanel(EngineBridge* bridge, ConversationStore* store, QWidget* parent = nullptr);

  const Conversation& conversation() const { return m_conversation; }
  bool isGenerating() const { return m_ticket != 0; }
  QString streamingText() const { return m_streamText; }
  int editingIndex() const { return m_editIndex; }
  TranscriptView* transcript() const { return m_transcript; }
  QPlainTextEdit* input() const { return m_input; }
  MessageBanner* banner() const { return m_banner; }
  OutputControls* outputControls() const { return m_output; }
  // Sets the system prompt of the open conversation (as typing it would).
  void setSystemPrompt(const QString& prompt);

 public slots:
  // Sends the input box's text (replacing message editingIndex() and what follows when editing).
  // When the last reply called tools, the text is the result of the first unanswered call (a
  // "tool" message); the reply continues once every call has its result.
  void send();
  void stop();
  // Drops the last reply and generates a new one for the same conversation.
  void regenerate();
  // Puts message `index` (a user message) in the input box; the next send() replaces it.
  void editMessage(int index);
  void cancelEdit();
  void newConversation();
  bool openConversation(const QString& id);
  bool renameConversation(const QString& id, const QString& title);
  bool deleteConversation(const QString& id);
  void startFind();

 signals:
  // A reply finished (also stopped or failed); the conversation is saved by then.
  void replyFinished(const lathe::ui::GenerationStats& stats);

 private:
  void startGeneration();
  void detachGeneration();
  void onDelta(quint64 ticket, const QString& text);
  void onFinished(quint64 ticket, const GenerationStats& stats);
  void onToolReply(quint64 ticket, const ChatToolReply& reply);
  void sendToolResult(const QString& text);
  void redraw();
  void saveConversation();
  void updateButtons();
  void findNext(bool backwards);
  void askDeleteSelected();

  EngineBridge* m_bridge;
  ConversationStore* m_store;
  Conversation m_conversation;
  quint64 m_ticket = 0;
  QString m_streamText;
  bool m_dirty = false;
  int m_editIndex = -1;
  QTimer m_redrawTimer;
  std::optional<ChatToolReply> m_toolReply;  // of the reply being generated
  bool m_outputOk = true;

  MessageBanner* m_banner = nullptr;
  QListView* m_list = nullptr;
  QPlainTextEdit* m_systemPrompt = nullptr;
  TranscriptView* m_transcript = nullptr;
  QWidget* m_findBar = nullptr;
  QLineEdit* m_findEdit = nullptr;
  QLabel* m_editNotice = nullptr;
  QPlainTextEdit* m_input = nullptr;
  QPushButton* m_sendButton = nullptr;
  QPushButton* m_stopButton = nullptr;
  QPushButton* m_regenerateButton = nullptr;
  SamplingControls* m_sampling = nullptr;
  OutputControls* m_output = nullptr;
  QLabel* m_modelLabel = nullptr;
};

}  // namespace lathe::ui
