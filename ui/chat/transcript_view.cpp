#include "ui/chat/transcript_view.h"

#include <QEvent>
#include <QLocale>
#include <QScrollBar>
#include <QTextCursor>
#include <QTextDocumentFragment>
#include <QUrl>

#include "ui/bridge/chat_request.h"

namespace lathe::ui {

namespace {

constexpr auto kMarkdown = QTextDocument::MarkdownFeatures(QTextDocument::MarkdownDialectGitHub |
                                                           QTextDocument::MarkdownNoHTML);

QString streamingHeader() {
  return QStringLiteral("**Assistant** · *generating…*\n\n");
}

}  // namespace

TranscriptView::TranscriptView(QWidget* parent) : QTextBrowser(parent) {
  setOpenLinks(false);
  setOpenExternalLinks(false);
  document()->setDocumentMargin(12);
  connect(this, &QTextBrowser::anchorClicked, this, [this](const QUrl& url) {
    // lathe:edit/<index>
    if (url.scheme() == QLatin1String("lathe") && url.path().startsWith(QLatin1String("edit/"))) {
      bool ok = false;
      const int index = url.path().mid(5).toInt(&ok);
      if (ok) emit editRequested(index);
    }
  });
}

QString TranscriptView::formatStats(const GenerationStats& s) {
  const QLocale loc;
  QStringList parts;
  parts << tr("%n prompt tokens", nullptr, s.promptTokens);
  if (s.cachedPromptTokens > 0) parts << tr("%1 cached").arg(s.cachedPromptTokens);
  if (s.ttftMs >= 0) parts << tr("TTFT %1 ms").arg(loc.toString(s.ttftMs, 'f', 0));
  parts << tr("%1 tokens/s").arg(loc.toString(s.tokensPerSecond, 'f', 1));
  parts << tr("%n tokens", nullptr, s.completionTokens);
  parts << tr("finish: %1").arg(s.finishReason);
  return parts.join(QStringLiteral(" · "));
}

QString TranscriptView::toolCallMarkdown(const ChatToolCall& call) {
  return QStringLiteral("**Call** `%1` · id `%2`\n\n```json\n%3\n```\n\n")
      .arg(call.name, call.id, prettyJson(call.arguments));
}

QString TranscriptView::messageMarkdown(const ChatMessage& m, int index) {
  QString md;
  if (m.role == QLatin1String("user")) {
    md += QStringLiteral("**You** · [✎ edit](lathe:edit/%1)\n\n").arg(index);
  } else if (m.role == QLatin1String("tool")) {
    md +=
        QStringLiteral("**Tool result** · `%1` · call `%2`\n\n```\n%3\n```\n\n")
            .arg(m.toolName.isEmpty() ? QStringLiteral("?") : m.toolName, m.toolCallId, m.content);
    return md;
  } else {
    md += QStringLiteral("**Assistant**");
    if (m.stats) md += QStringLiteral(" · *%1*").arg(formatStats(*m.stats));
    md += QStringLiteral("\n\n");
    if (m.stats && !m.stats->error.isEmpty())
      md += QStringLiteral("> ⚠ %1\n\n").arg(m.stats->error);
  }
  if (!m.content.isEmpty() || m.toolCalls.isEmpty())
    md += (m.content.isEmpty() ? QStringLiteral("*(empty)*") : m.content) + QStringLiteral("\n\n");
  for (const ChatToolCall& call : m.toolCalls) md += toolCallMarkdown(call);
  return md;
}

bool TranscriptView::isFollowing() const {
  const QScrollBar* bar = verticalScrollBar();
  return bar->value() >= bar->maximum() - 8;
}

void TranscriptView::scrollToEndIfFollowing(bool following) {
  if (following) verticalScrollBar()->setValue(verticalScrollBar()->maximum());
}

void TranscriptView::showConversation(const Conversation& c) {
  QString md;
  if (!c.systemPrompt.trimmed().isEmpty())
    md += QStringLiteral("*System prompt:* %1\n\n---\n\n").arg(c.systemPrompt.simplified());
  for (int i = 0; i < c.messages.size(); ++i) {
    md += messageMarkdown(c.messages[i], i);
    if (i + 1 < c.messages.size()) md += QStringLiteral("---\n\n");
  }
  m_settled = md;
  m_streaming.clear();
  m_streamStart = -1;
  renderSettled();
  scrollToEndIfFollowing(true);
}

void TranscriptView::renderSettled() {
  document()->setMarkdown(m_settled, kMarkdown);
}

void TranscriptView::changeEvent(QEvent* event) {
  QTextBrowser::changeEvent(event);
  if (event->type() != QEvent::PaletteChange) return;
  const bool streaming = isStreaming();
  const QString streamingText = m_streaming;
  renderSettled();
  m_streamStart = -1;
  if (streaming) {
    beginStreaming();
    setStreamingText(streamingText);
  }
}

void TranscriptView::beginStreaming() {
  const bool following = isFollowing();
  m_streaming.clear();
  QTextCursor cursor(document());
  cursor.movePosition(QTextCursor::End);
  if (!document()->isEmpty()) {
    cursor.insertBlock();
    cursor.insertHtml(QStringLiteral("<hr/>"));
    cursor.insertBlock();
  }
  m_streamStart = cursor.position();
  cursor.insertFragment(QTextDocumentFragment::fromMarkdown(streamingHeader(), kMarkdown));
  m_renderCount = 0;
  scrollToEndIfFollowing(following);
}

void TranscriptView::setStreamingText(const QString& markdown) {
  if (m_streamStart < 0) return;
  m_streaming = markdown;
  const bool following = isFollowing();
  QTextCursor cursor(document());
  cursor.setPosition(m_streamStart);
  cursor.movePosition(QTextCursor::End, QTextCursor::KeepAnchor);
  cursor.beginEditBlock();
  cursor.removeSelectedText();
  cursor.insertFragment(
      QTextDocumentFragment::fromMarkdown(streamingHeader() + markdown, kMarkdown));
  cursor.endEditBlock();
  ++m_renderCount;
  scrollToEndIfFollowing(following);
}

}  // namespace lathe::ui
