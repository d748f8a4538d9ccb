// The Chat page with the real engine (CPU backend, default model): a message typed and sent streams
// a reply while the event loop stays responsive (gaps < 100 ms), the transcript is redrawn on a
// timer rather than per token, replies keep their stats, and stop, regenerate, edit-and-resend and
// saved conversations (open, rename, delete) work.
#include <QtTest>

#include <QDoubleSpinBox>
#include <QElapsedTimer>
#include <QListView>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTextBlock>

#include "test_support.h"
#include "ui/app/main_window.h"
#include "ui/bridge/engine_bridge.h"
#include "ui/chat/chat_panel.h"
#include "ui/chat/conversation_store.h"
#include "ui/chat/transcript_view.h"
#include "ui/common/message_banner.h"
#include "ui_test_support.h"

using namespace lathe::ui;

class ChatTest : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;
  std::unique_ptr<EngineBridge> m_bridge;
  std::unique_ptr<MainWindow> m_window;

  ChatPanel* chat() const { return m_window->chat(); }
  QPushButton* button(const char* name) const { return chat()->findChild<QPushButton*>(name); }
  QString conversationsFolder() const { return m_dir.filePath("conversations"); }

  void setSampling(double temperature, int maxTokens) {
    chat()->findChild<QDoubleSpinBox*>("temperature")->setValue(temperature);
    chat()->findChild<QSpinBox*>("maxTokens")->setValue(maxTokens);
  }

  // Types `text` into the input box and clicks Send; waits for the reply to finish.
  GenerationStats sendAndWait(const QString& text, int timeoutMs = 120000) {
    QSignalSpy finished(chat(), &ChatPanel::replyFinished);
    chat()->input()->setFocus();
    QTest::keyClicks(chat()->input(), text);
    QTest::mouseClick(button("sendButton"), Qt::LeftButton);
    if (!finished.wait(timeoutMs)) return {};
    return finished.at(0).at(0).value<GenerationStats>();
  }

 private slots:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    test::isolateSettings(m_dir);
    const QString model = QString::fromStdString(lathe::test::default_model_path());
    if (!QFile::exists(model)) QSKIP("default model missing: run scripts/fetch-default-model.sh");
    m_bridge = std::make_unique<EngineBridge>();
    m_window = std::make_unique<MainWindow>(m_bridge.get(), conversationsFolder());
    m_window->show();
    QVERIFY(QTest::qWaitForWindowExposed(m_window.get()));
    // Sending before a model is loaded explains what to do instead of failing silently.
    m_window->showPage(MainWindow::kChatPage);
    chat()->input()->setPlainText("hello");
    chat()->send();
    QVERIFY(chat()->banner()->text().contains("Models"));
    chat()->input()->clear();

    QSignalSpy loaded(m_bridge.get(), &EngineBridge::modelLoaded);
    m_window->openModel(model, /*load=*/true);
    QVERIFY(loaded.wait(120000));
    QTRY_COMPARE(m_window->pages()->currentWidget(), chat());  // a loaded model opens the chat
  }

  void cleanupTestCase() {
    m_window.reset();
    m_bridge.reset();
  }

  void replyStreamsWhileTheWindowStaysResponsive() {
    setSampling(0.0, 40);
    QSignalSpy deltas(m_bridge.get(), &EngineBridge::generationDelta);
    test::ResponsivenessProbe probe;
    QElapsedTimer clock;
    probe.start();
    clock.start();
    const GenerationStats stats = sendAndWait("Name three colors of the rainbow.");
    const qint64 elapsedMs = clock.elapsed();
    probe.stop();
    QVERIFY2(!stats.finishReason.isEmpty(), "no reply within the timeout");
    QVERIFY2(probe.maxGapMs() < 100,
             qPrintable(QString("the event loop stalled for %1 ms").arg(probe.maxGapMs())));
    QVERIFY(probe.ticks() > 20);
    QVERIFY2(deltas.count() >= 2, "the reply arrived in one piece, not streamed");
    QVERIFY(stats.finishReason == "stop" || stats.finishReason == "length");
    QVERIFY(stats.promptTokens > 5);
    QVERIFY(stats.completionTokens > 0 && stats.completionTokens <= 40);
    QVERIFY(stats.ttftMs > 0 && stats.ttftMs < elapsedMs);
    QVERIFY(stats.tokensPerSecond > 0);
    // Redrawn by the timer: at most one redraw per period, however many tokens came.
    const int redraws = chat()->transcript()->renderCount();
    QVERIFY(redraws >= 1);
    QVERIFY2(redraws <= elapsedMs / ChatPanel::kRedrawMs + 2, qPrintable(QString::number(redraws)));

    const Conversation& c = chat()->conversation();
    QCOMPARE(c.messages.size(), 2);
    QCOMPARE(c.messages[0].content, QString("Name three colors of the rainbow."));
    QVERIFY(!c.messages[1].content.trimmed().isEmpty());
    QCOMPARE(c.messages[1].stats->completionTokens, stats.completionTokens);
    // The transcript shows the reply and its stats; the conversation is saved.
    const QString shown = chat()->transcript()->toPlainText();
    QVERIFY(shown.contains(c.messages[1].content.trimmed().left(10)));
    QVERIFY(shown.contains("TTFT"));
    QVERIFY(shown.contains(QString("finish: %1").arg(stats.finishReason)));
    QVERIFY(QFile::exists(conversationsFolder() + "/" + c.id + ".json"));
  }

  void regenerateReplacesTheReply() {
    const QString before = chat()->conversation().messages.back().content;
    QSignalSpy finished(chat(), &ChatPanel::replyFinished);
    QTest::mouseClick(button("regenerateButton"), Qt::LeftButton);
    QVERIFY(finished.wait(120000));
    QCOMPARE(chat()->conversation().messages.size(), 2);
    // Greedy decoding on the CPU backend is deterministic: the same reply again.
    QCOMPARE(chat()->conversation().messages.back().content, before);
  }

  void editAndResendReplacesTheTail() {
    // Click the "edit" link of the first user message.
    emit chat()->transcript()->anchorClicked(QUrl("lathe:edit/0"));
    QCOMPARE(chat()->editingIndex(), 0);
    QCOMPARE(chat()->input()->toPlainText(), QString("Name three colors of the rainbow."));
    chat()->input()->clear();
    const GenerationStats stats = sendAndWait("Name two planets.");
    QVERIFY(!stats.finishReason.isEmpty());
    const Conversation& c = chat()->conversation();
    QCOMPARE(c.messages.size(), 2);  // the old pair was replaced, not appended to
    QCOMPARE(c.messages[0].content, QString("Name two planets."));
    QCOMPARE(chat()->editingIndex(), -1);
  }

  void stopEndsTheReplyWithAbort() {
    setSampling(0.0, 4000);
    QSignalSpy deltas(m_bridge.get(), &EngineBridge::generationDelta);
    QSignalSpy finished(chat(), &ChatPanel::replyFinished);
    chat()->input()->setPlainText("Count from 1 to 1000, one number per line.");
    QTest::mouseClick(button("sendButton"), Qt::LeftButton);
    QVERIFY(button("stopButton")->isEnabled());
    QVERIFY(!button("sendButton")->isEnabled());
    QVERIFY(deltas.wait(60000));
    QTest::mouseClick(button("stopButton"), Qt::LeftButton);
    QVERIFY(finished.wait(30000));
    const auto stats = finished.at(0).at(0).value<GenerationStats>();
    QCOMPARE(stats.finishReason, QString("abort"));
    QVERIFY(stats.completionTokens < 4000);
    QVERIFY(!chat()->conversation().messages.back().content.isEmpty());  // the partial reply stays
    QVERIFY(button("sendButton")->isEnabled());
  }

  void conversationsReopenRenameAndDelete() {
    auto* list = chat()->findChild<QListView*>("conversationList");
    auto* store = qobject_cast<ConversationStore*>(list->model());
    QVERIFY(store);
    const QString firstId = chat()->conversation().id;
    const int firstCount = chat()->conversation().messages.size();
    // A second conversation, with a Markdown code block in the reply.
    chat()->newConversation();
    QVERIFY(chat()->conversation().messages.isEmpty());
    setSampling(0.0, 24);
    QVERIFY(!sendAndWait("Write a Python hello world.").finishReason.isEmpty());
    QCOMPARE(store->rowCount(), 2);
    const QString secondId = chat()->conversation().id;
    // Reopen the first by clicking it in the list.
    const QModelIndex first = store->index(store->indexOf(firstId));
    QTest::mouseClick(list->viewport(), Qt::LeftButton, {}, list->visualRect(first).center());
    QCOMPARE(chat()->conversation().id, firstId);
    QCOMPARE(chat()->conversation().messages.size(), firstCount);
    QVERIFY(chat()->transcript()->toPlainText().contains("Name two planets."));
    // Editing the open conversation's row renames it, and its next save keeps the new title.
    QVERIFY(store->setData(first, "Edited in the list", Qt::EditRole));
    QCOMPARE(chat()->conversation().title, QString("Edited in the list"));
    // Rename and delete.
    QVERIFY(chat()->renameConversation(secondId, "Hello world"));
    QCOMPARE(store->data(store->index(store->indexOf(secondId)), Qt::DisplayRole).toString(),
             QString("Hello world"));
    {
      ConversationStore restarted(conversationsFolder());  // the next start sees the new title
      QCOMPARE(
          restarted.data(restarted.index(restarted.indexOf(secondId)), Qt::DisplayRole).toString(),
          QString("Hello world"));
    }
    QVERIFY(chat()->deleteConversation(firstId));
    QCOMPARE(store->rowCount(), 1);
    QVERIFY(!QFile::exists(conversationsFolder() + "/" + firstId + ".json"));
    QCOMPARE(chat()->conversation().id, secondId);  // the open one was deleted: its neighbour opens
    QVERIFY(chat()->deleteConversation(secondId));
    QCOMPARE(store->rowCount(), 0);
    QVERIFY(chat()->conversation().messages.isEmpty());  // none left: a new chat
    QVERIFY(!chat()->transcript()->toPlainText().contains("Write a Python hello world."));
    // A fresh store (next start) sees the same: nothing left.
    ConversationStore again(conversationsFolder());
    QCOMPARE(again.rowCount(), 0);
  }

  void markdownAndCodeBlocksAreRendered() {
    Conversation c = Conversation::create();
    c.title = "Markdown";
    GenerationStats stats;
    stats.finishReason = "stop";
    c.messages = {
        {"user", "Show code", std::nullopt},
        {"assistant",
         "Here is **bold** and code:\n\n```python\nprint('hi')\n```\n\n<b>not html</b>", stats}};
    ConversationStore* store = qobject_cast<ConversationStore*>(
        chat()->findChild<QListView*>("conversationList")->model());
    QVERIFY(store->save(c));
    QVERIFY(chat()->openConversation(c.id));
    QTextDocument* doc = chat()->transcript()->document();
    bool codeBlock = false;
    bool bold = false;
    for (QTextBlock b = doc->begin(); b.isValid(); b = b.next()) {
      if (b.blockFormat().stringProperty(QTextFormat::BlockCodeLanguage) == "python" &&
          b.text().contains("print('hi')"))
        codeBlock = true;
      for (auto it = b.begin(); !it.atEnd(); ++it)
        if (it.fragment().text() == "bold" &&
            it.fragment().charFormat().fontWeight() >= QFont::Bold)
          bold = true;
    }
    QVERIFY(codeBlock);
    QVERIFY(bold);
    QVERIFY(doc->toPlainText().contains("<b>not html</b>"));  // model output cannot inject HTML
  }
};

QTEST_MAIN(ChatTest)
#include "chat_test.moc"
