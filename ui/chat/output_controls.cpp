#include "ui/chat/output_controls.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFontDatabase>
#include <QHBoxLayout>
#include <QLabel>
#include <QPlainTextEdit>
#include <QVBoxLayout>

namespace lathe::ui {

namespace {

QPlainTextEdit* makeJsonEditor(const QString& name, const QString& placeholder) {
  auto* edit = new QPlainTextEdit;
  edit->setObjectName(name);
  edit->setPlaceholderText(placeholder);
  edit->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  edit->setWordWrapMode(QTextOption::WrapAtWordBoundaryOrAnywhere);  // the panel is narrow
  edit->setTabChangesFocus(true);
  edit->setMaximumHeight(edit->fontMetrics().lineSpacing() * 8);
  return edit;
}

QLabel* makeErrorLabel(const QString& name) {
  auto* label = new QLabel;
  label->setObjectName(name);
  label->setWordWrap(true);
  label->setTextInteractionFlags(Qt::TextSelectableByMouse);
  label->setStyleSheet(QStringLiteral("color: #c62828;"));
  label->hide();
  return label;
}

}  // namespace

OutputControls::OutputControls(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  m_json = new QCheckBox(tr("JSON output"));
  m_json->setObjectName(QStringLiteral("jsonOutput"));
  m_json->setToolTip(
      tr("The reply is constrained to JSON (as the API's response_format): any JSON object, or "
         "JSON valid under the schema below."));
  layout->addWidget(m_json);
  m_schema = makeJsonEditor(QStringLiteral("jsonSchema"),
                            tr("JSON schema (optional), e.g.\n{\"type\": \"object\", "
                               "\"properties\": {\"name\": {\"type\": \"string\"}}}"));
  layout->addWidget(m_schema);
  m_schemaError = makeErrorLabel(QStringLiteral("jsonSchemaError"));
  layout->addWidget(m_schemaError);

  auto* toolsHeader = new QHBoxLayout;
  auto* toolsLabel = new QLabel(tr("Tools:"));
  toolsLabel->setToolTip(tr("Functions the model may call, as OpenAI tool definitions."));
  m_toolChoice = new QComboBox;
  m_toolChoice->setObjectName(QStringLiteral("toolChoice"));
  m_toolChoice->addItem(tr("auto"), QStringLiteral("auto"));
  m_toolChoice->addItem(tr("required"), QStringLiteral("required"));
  m_toolChoice->addItem(tr("none"), QStringLiteral("none"));
  m_toolChoice->setToolTip(
      tr("auto: the model decides; required: it must call a tool (enforced by the grammar); "
         "none: the tools are ignored."));
  toolsHeader->addWidget(toolsLabel);
  toolsHeader->addStretch(1);
  toolsHeader->addWidget(m_toolChoice);
  layout->addLayout(toolsHeader);
  m_tools = makeJsonEditor(QStringLiteral("toolsEditor"),
                           tr("[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
                              "\"parameters\": {...}}}]"));
  layout->addWidget(m_tools);
  m_toolsError = makeErrorLabel(QStringLiteral("toolsError"));
  layout->addWidget(m_toolsError);

  m_checkTimer.setSingleShot(true);
  m_checkTimer.setInterval(kCheckDelayMs);
  connect(&m_checkTimer, &QTimer::timeout, this, &OutputControls::check);
  connect(m_json, &QCheckBox::toggled, this, &OutputControls::onEdited);
  connect(m_schema, &QPlainTextEdit::textChanged, this, &OutputControls::onEdited);
  connect(m_tools, &QPlainTextEdit::textChanged, this, &OutputControls::onEdited);
  connect(m_toolChoice, &QComboBox::currentIndexChanged, this, &OutputControls::onEdited);
  updateEnabled();
}

ChatOutputSettings OutputControls::settings() const {
  ChatOutputSettings s;
  s.jsonOutput = m_json->isChecked();
  s.jsonSchema = m_schema->toPlainText();
  s.tools = m_tools->toPlainText();
  s.toolChoice = m_toolChoice->currentData().toString();
  return s;
}

void OutputControls::setSettings(const ChatOutputSettings& s) {
  m_updating = true;
  m_json->setChecked(s.jsonOutput);
  if (m_schema->toPlainText() != s.jsonSchema) m_schema->setPlainText(s.jsonSchema);
  if (m_tools->toPlainText() != s.tools) m_tools->setPlainText(s.tools);
  const int choice = m_toolChoice->findData(s.toolChoice);
  m_toolChoice->setCurrentIndex(choice >= 0 ? choice : 0);
  m_updating = false;
  updateEnabled();
  check();
}

ChatOutputProblem OutputControls::problem() {
  if (m_checkTimer.isActive()) check();
  return m_problem;
}

void OutputControls::onEdited() {
  updateEnabled();
  if (m_updating) return;
  m_checkTimer.start();
  emit changed(settings());
}

void OutputControls::updateEnabled() {
  m_schema->setEnabled(m_json->isChecked());
}

void OutputControls::check() {
  m_checkTimer.stop();
  m_problem = checkChatOutput(settings());
  const bool schema = m_problem.field == ChatOutputField::kJsonSchema;
  const bool tools = m_problem.field == ChatOutputField::kTools;
  m_schemaError->setText(schema ? m_problem.message : QString());
  m_schemaError->setVisible(schema);
  m_toolsError->setText(tools ? m_problem.message : QString());
  m_toolsError->setVisible(tools);
  const bool ok = m_problem.isOk();
  if (ok != m_ok) {
    m_ok = ok;
    emit validityChanged(ok);
  }
}

}  // namespace lathe::ui
