// The chat transcript: messages rendered from Markdown (QTextDocument, GitHub dialect, raw HTML
// disabled so model output cannot inject markup), each reply followed by its stats. While a reply
// streams, only its own part of the document is re-rendered, so the cost of a redraw does not
// grow with the conversation. User messages carry an "edit" link (editRequested). Tool calls
// show as structured calls (function, id, indented arguments), tool results as code blocks.
#pragma once

#include <QTextBrowser>

#include "ui/chat/conversation.h"

namespace lathe::ui {

class TranscriptView : public QTextBrowser {
  Q_OBJECT
 public:
  explicit TranscriptView(QWidget* parent = nullptr);

  // Renders the whole conversation (no streaming part).
  void showConversation(const Conversation& conversation);
  // Starts a streaming reply after the rendered messages.
  void beginStreaming();
  // Replaces the streaming reply's text (Markdown).
  void setStreamingText(const QString& markdown);
  bool isStreaming() const { return m_streamStart >= 0; }
  int renderCount() const { return m_renderCount; }  // streaming redraws so far (tests)

  static QString formatStats(const GenerationStats& stats);
  static QString messageMarkdown(const ChatMessage& message, int index);
  // A call as the transcript shows it: the function, its id, the arguments as indented JSON.
  static QString toolCallMarkdown(const ChatToolCall& call);

 signals:
  void editRequested(int messageIndex);

 protected:
  // The Markdown importer bakes palette colors (links) into the document: render again.
  void changeEvent(QEvent* event) override;

 private:
  void renderSettled();
  void scrollToEndIfFollowing(bool following);
  bool isFollowing() const;

  QString m_settled;       // Markdown of the rendered conversation
  QString m_streaming;     // Markdown of the streaming reply (while isStreaming())
  int m_streamStart = -1;  // document position where the streaming reply begins
  int m_renderCount = 0;
};

}  // namespace lathe::ui
