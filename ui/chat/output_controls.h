// The chat's output controls: a "JSON output" toggle with an optional JSON schema, and a tools
// editor (OpenAI tool definitions pasted as a JSON array) with the tool choice. Both editors are
// checked as the user types (debounced, kCheckDelayMs) by the server's own code, so a schema or a
// tool list that the API would refuse shows the same message under its editor; problem() says
// what blocks sending. Emits changed() on every edit.
#pragma once

#include <QTimer>
#include <QWidget>

#include "ui/bridge/bridge_types.h"
#include "ui/bridge/chat_request.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QPlainTextEdit;

namespace lathe::ui {

class OutputControls : public QWidget {
  Q_OBJECT
 public:
  static constexpr int kCheckDelayMs = 200;

  explicit OutputControls(QWidget* parent = nullptr);

  ChatOutputSettings settings() const;
  void setSettings(const ChatOutputSettings& settings);
  // The current problem (checked now if an edit is pending); isOk() when the settings are usable.
  ChatOutputProblem problem();

 signals:
  void changed(const lathe::ui::ChatOutputSettings& settings);
  // The settings became usable or stopped being so.
  void validityChanged(bool ok);

 private:
  void onEdited();
  void check();
  void updateEnabled();

  bool m_updating = false;
  bool m_ok = true;
  ChatOutputProblem m_problem;
  QTimer m_checkTimer;
  QCheckBox* m_json = nullptr;
  QPlainTextEdit* m_schema = nullptr;
  QLabel* m_schemaError = nullptr;
  QPlainTextEdit* m_tools = nullptr;
  QComboBox* m_toolChoice = nullptr;
  QLabel* m_toolsError = nullptr;
};

}  // namespace lathe::ui
