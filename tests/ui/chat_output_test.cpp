// The Chat page's output controls with the real engine (CPU backend, default model): JSON output
// with a schema gives schema-valid replies; an invalid schema or tool list shows the server's own
// message under its editor and blocks Send; a reply that calls tools is shown as structured calls
// (function, id, indented arguments), the user answers with a tool result and the reply continues;
// the settings are saved with the conversation.
#include <QtTest>

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QListView>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>

#include "test_support.h"
#include "ui/app/main_window.h"
#include "ui/bridge/chat_request.h"
#include "ui/bridge/engine_bridge.h"
#include "ui/chat/chat_panel.h"
#include "ui/chat/conversation_store.h"
#include "ui/chat/output_controls.h"
#include "ui/chat/transcript_view.h"
#include "ui/common/message_banner.h"
#include "ui_test_support.h"

using namespace lathe::ui;

namespace {

const char* kPersonSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 20},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "role": {"enum": ["admin", "user", "guest"]}
  },
  "required": ["name", "age", "role"]
})";

const char* kWeatherTools = R"([{"type": "function", "function": {
  "name": "get_weather", "description": "The current weather in a city.",
  "parameters": {"type": "object",
                 "properties": {"city": {"type": "string", "maxLength": 24},
                                "unit": {"enum": ["celsius", "fahrenheit"]}},
                 "required": ["city", "unit"]}}}])";

}  // namespace

class ChatOutputTest : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;
  std::unique_ptr<EngineBridge> m_bridge;
  std::unique_ptr<MainWindow> m_window;

  ChatPanel* chat() const { return m_window->chat(); }
  QPushButton* sendButton() const { return chat()->findChild<QPushButton*>("sendButton"); }
  QCheckBox* jsonToggle() const { return chat()->findChild<QCheckBox*>("jsonOutput"); }
  QPlainTextEdit* schemaEditor() const { return chat()->findChild<QPlainTextEdit*>("jsonSchema"); }
  QPlainTextEdit* toolsEditor() const { return chat()->findChild<QPlainTextEdit*>("toolsEditor"); }
  QComboBox* toolChoice() const { return chat()->findChild<QComboBox*>("toolChoice"); }
  QLabel* schemaError() const { return chat()->findChild<QLabel*>("jsonSchemaError"); }
  QLabel* toolsError() const { return chat()->findChild<QLabel*>("toolsError"); }
  ConversationStore* store() const {
    return qobject_cast<ConversationStore*>(
        chat()->findChild<QListView*>("conversationList")->model());
  }

  void setSampling(double temperature, int maxTokens) {
    chat()->findChild<QDoubleSpinBox*>("temperature")->setValue(temperature);
    chat()->findChild<QSpinBox*>("maxTokens")->setValue(maxTokens);
  }
  // Resets the output controls to plain text.
  void plainOutput() {
    jsonToggle()->setChecked(false);
    schemaEditor()->clear();
    toolsEditor()->clear();
    toolChoice()->setCurrentIndex(toolChoice()->findData("auto"));
    QVERIFY(chat()->outputControls()->problem().isOk());
  }
  // Types `text`, clicks Send and waits for the reply.
  GenerationStats sendAndWait(const QString& text, int timeoutMs = 180000) {
    QSignalSpy finished(chat(), &ChatPanel::replyFinished);
    chat()->input()->setFocus();
    QTest::keyClicks(chat()->input(), text);
    QTest::mouseClick(sendButton(), Qt::LeftButton);
    if (!finished.wait(timeoutMs)) return {};
    return finished.at(0).at(0).value<GenerationStats>();
  }
  // Puts `schema` in the editor with JSON on and waits for the check.
  void typeSchema(const QString& schema) {
    jsonToggle()->setChecked(true);
    schemaEditor()->setPlainText(schema);
    chat()->outputControls()->problem();  // checks now instead of after the debounce
  }
  // The editor's message for a bad input, and Send blocked (button and slot).
  void expectBlocked(QLabel* label, const QString& expected) {
    chat()->outputControls()->problem();  // checks now instead of after the debounce
    QTRY_VERIFY(label->isVisible());
    QVERIFY2(label->text().contains(expected), qPrintable(label->text()));
    QVERIFY(!sendButton()->isEnabled());
    const int before = chat()->conversation().messages.size();
    chat()->input()->setPlainText("hello");
    chat()->send();
    QCOMPARE(chat()->conversation().messages.size(), before);
    QVERIFY(!chat()->isGenerating());
    QVERIFY(chat()->banner()->text().contains(expected));
    chat()->input()->clear();
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
    QSignalSpy loaded(m_bridge.get(), &EngineBridge::modelLoaded);
    m_window->openModel(model, /*load=*/true);
    QVERIFY(loaded.wait(120000));
    QTRY_COMPARE(m_window->pages()->currentWidget(), chat());
  }

  void cleanupTestCase() {
    m_window.reset();
    m_bridge.reset();
  }

  void badInputShowsTheServersMessageAndBlocksSend() {
    chat()->newConversation();
    plainOutput();
    QTRY_VERIFY(sendButton()->isEnabled());
    // Each kind of bad input, with the words of the API's 400.
    typeSchema(R"({"type": "object", "properties": {"n": {"type": "integer",)");
    expectBlocked(schemaError(), "the schema is not valid JSON");
    typeSchema(R"({"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 3}}})");
    expectBlocked(schemaError(), "unsupported keyword multipleOf");
    typeSchema(R"({"type": "string", "pattern": "[^\\x00-\\x{10FFFF}]"})");
    QTRY_VERIFY(schemaError()->isVisible());
    QVERIFY(!sendButton()->isEnabled());
    typeSchema(R"(["not", "a", "schema"])");
    expectBlocked(schemaError(), "response_format.json_schema.schema");
    // Fixed: the message goes and Send comes back.
    typeSchema(kPersonSchema);
    QVERIFY(schemaError()->isHidden());
    QTRY_VERIFY(sendButton()->isEnabled());
    jsonToggle()->setChecked(false);

    toolsEditor()->setPlainText(R"([{"type": "function", "function": {"description": "x"}}])");
    expectBlocked(toolsError(), "tools[0].function.name is required");
    toolsEditor()->setPlainText(R"({"type": "function"})");
    expectBlocked(toolsError(), "tools must be an array");
    toolsEditor()->setPlainText(R"([{"type": "function", "function": {"name": "f")");
    expectBlocked(toolsError(), "not valid JSON");
    toolsEditor()->setPlainText(
        R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
            "properties": {"x": {"type": "number", "multipleOf": 2}}}}}])");
    expectBlocked(toolsError(), "unsupported keyword multipleOf");
    // JSON output and tools together: refused as the server refuses them.
    toolsEditor()->setPlainText(kWeatherTools);
    jsonToggle()->setChecked(true);
    schemaEditor()->clear();
    expectBlocked(toolsError(), "not both");
    plainOutput();
    QTRY_VERIFY(sendButton()->isEnabled());
  }

  void jsonWithASchemaGivesSchemaValidReplies() {
    chat()->newConversation();
    plainOutput();
    setSampling(0.8, 200);  // room for \u escapes: the schema bounds the reply, so it stops
    typeSchema(kPersonSchema);
    QVERIFY(chat()->outputControls()->problem().isOk());
    for (int i = 0; i < 3; ++i) {
      if (i > 0) chat()->newConversation();
      const GenerationStats stats =
          sendAndWait(QStringLiteral("Describe a user of a web site (%1).").arg(i));
      QCOMPARE(stats.finishReason, QString("stop"));
      const QString reply = chat()->conversation().messages.back().content;
      QJsonParseError error;
      const QJsonDocument doc = QJsonDocument::fromJson(reply.toUtf8(), &error);
      QVERIFY2(error.error == QJsonParseError::NoError && doc.isObject(), qPrintable(reply));
      const QJsonObject o = doc.object();
      QCOMPARE(o.keys().size(), 3);
      QVERIFY2(o.value("name").isString() && o.value("name").toString().size() <= 20,
               qPrintable(reply));
      QVERIFY2(o.value("age").isDouble(), qPrintable(reply));
      const double age = o.value("age").toDouble();
      QVERIFY2(age == std::floor(age) && age >= 0 && age <= 120, qPrintable(reply));
      QVERIFY2(QStringList({"admin", "user", "guest"}).contains(o.value("role").toString()),
               qPrintable(reply));
    }
    // Saved with the conversation: reopening it restores JSON output and the schema.
    const QString id = chat()->conversation().id;
    chat()->newConversation();
    plainOutput();
    QVERIFY(chat()->openConversation(id));
    QVERIFY(jsonToggle()->isChecked());
    QCOMPARE(schemaEditor()->toPlainText(), QString(kPersonSchema));
    Conversation saved;
    QVERIFY(store()->load(id, &saved));
    QVERIFY(saved.output.jsonOutput);
    QCOMPARE(saved.output.jsonSchema, QString(kPersonSchema));
  }

  void toolCallRoundTrip() {
    chat()->newConversation();
    plainOutput();
    setSampling(0.0, 160);
    toolsEditor()->setPlainText(kWeatherTools);
    toolChoice()->setCurrentIndex(toolChoice()->findData("required"));  // the grammar forces a call
    QVERIFY(chat()->outputControls()->problem().isOk());
    GenerationStats stats = sendAndWait("What is the weather in Paris?");
    QCOMPARE(stats.finishReason, QString("tool_calls"));
    const ChatMessage call = chat()->conversation().messages.back();
    QCOMPARE(call.role, QString("assistant"));
    QVERIFY(!call.toolCalls.isEmpty());
    for (const ChatToolCall& c : call.toolCalls) {
      QCOMPARE(c.name, QString("get_weather"));
      QVERIFY(!c.id.isEmpty());
      const QJsonObject args = QJsonDocument::fromJson(c.arguments.toUtf8()).object();
      QVERIFY2(args.value("city").isString(), qPrintable(c.arguments));
      QVERIFY2(args.value("unit") == "celsius" || args.value("unit") == "fahrenheit",
               qPrintable(c.arguments));
    }
    // Shown as a structured call, not as the model's raw syntax.
    const QString shown = chat()->transcript()->toPlainText();
    QVERIFY2(shown.contains("Call get_weather"), qPrintable(shown));
    QVERIFY2(shown.contains("\"city\": "), qPrintable(shown));  // indented arguments
    QVERIFY(!shown.contains("\"parameters\""));
    QVERIFY(!shown.contains("<tool_call>"));
    // The input now answers the call.
    QCOMPARE(sendButton()->text(), QString("Send result"));
    QVERIFY(chat()->input()->placeholderText().contains("get_weather"));

    // Answer every call; the last answer continues the reply (tool choice back to auto so that
    // the model may answer in text).
    toolChoice()->setCurrentIndex(toolChoice()->findData("auto"));
    const int calls = call.toolCalls.size();
    const QString id = chat()->conversation().id;
    for (int i = 0; i + 1 < calls; ++i) {
      chat()->input()->setPlainText(R"({"temperature": 21, "sky": "clear"})");
      chat()->send();
      QVERIFY(!chat()->isGenerating());
    }
    stats = sendAndWait(R"({"temperature": 21, "sky": "clear"})");
    QVERIFY(!stats.finishReason.isEmpty());
    QVERIFY(stats.error.isEmpty());
    const Conversation& c = chat()->conversation();
    QCOMPARE(c.id, id);  // saving a reply again keeps its conversation open
    QCOMPARE(c.messages.size(), 2 + calls + 1);
    const ChatMessage& result = c.messages[2];
    QCOMPARE(result.role, QString("tool"));
    QCOMPARE(result.toolCallId, call.toolCalls[0].id);
    QCOMPARE(result.toolName, QString("get_weather"));
    QCOMPARE(c.messages.back().role, QString("assistant"));
    QVERIFY(chat()->transcript()->toPlainText().contains("Tool result"));
    QCOMPARE(sendButton()->text(), QString("Send"));

    // The calls and results are saved and come back.
    Conversation saved;
    QVERIFY(store()->load(c.id, &saved));
    QCOMPARE(saved.messages[1].toolCalls.size(), calls);
    QCOMPARE(saved.messages[1].toolCalls[0].arguments, call.toolCalls[0].arguments);
    QCOMPARE(saved.messages[2].toolCallId, call.toolCalls[0].id);
    QCOMPARE(saved.output.tools, QString(kWeatherTools));
  }

  void fixtureTranscriptRendersStructuredCalls() {
    Conversation c = Conversation::create();
    c.title = "Tools fixture";
    GenerationStats stats;
    stats.finishReason = "tool_calls";
    ChatMessage reply{"assistant", "", stats};
    reply.toolCalls = {{"call00001", "get_weather", R"({"city":"Oslo","unit":"celsius"})"},
                       {"call00002", "get_time", R"({"zone":"Europe/Oslo"})"}};
    ChatMessage result{"tool", R"({"temperature": -3})", std::nullopt};
    result.toolCallId = "call00001";
    result.toolName = "get_weather";
    c.messages = {{"user", "Weather and time in Oslo?", std::nullopt}, reply, result};
    QVERIFY(store()->save(c));
    QVERIFY(chat()->openConversation(c.id));
    const QString shown = chat()->transcript()->toPlainText();
    QVERIFY2(shown.contains("Call get_weather · id call00001"), qPrintable(shown));
    QVERIFY(shown.contains("Call get_time · id call00002"));
    // Arguments indented, members in the model's order.
    QVERIFY2(shown.contains("{\n  \"city\": \"Oslo\",\n  \"unit\": \"celsius\"\n}"),
             qPrintable(shown));
    QVERIFY(shown.contains("Tool result · get_weather · call call00001"));
    QVERIFY(!shown.contains("(empty)"));  // a reply of calls only has no empty-content line
    // The second call is unanswered: the input answers it.
    QCOMPARE(sendButton()->text(), QString("Send result"));
    QVERIFY(chat()->input()->placeholderText().contains("get_time"));
    QCOMPARE(chat()->conversation().unansweredToolCall()->id, QString("call00002"));
  }
};

QTEST_MAIN(ChatOutputTest)
#include "chat_output_test.moc"
