// Step 2 of the quantization wizard, for the calibrated schemes (GPTQ, AWQ): which text the model
// reads to learn each layer's input statistics (the built-in set, a text / JSONL chat / ShareGPT
// file, or the user's own saved conversations), and how much of it (samples × tokens). The
// library reads and checks the set before any work (engine/quant/calibration.h); its refusal
// shows on the Run page.
//
// Saved conversations: the option shows how many there are and is disabled, with a note, when
// there are none. On Next they are written as chat JSONL (conversation_export.h) to
// conversationsCalibrationPath(), which becomes the calibration file.
#pragma once

#include <QWizardPage>

#include "ui/bridge/quantize_types.h"

class QLabel;
class QLineEdit;
class QRadioButton;
class QSpinBox;

namespace lathe::ui {

class ConversationStore;
class MessageBanner;

class CalibrationPage : public QWizardPage {
  Q_OBJECT
 public:
  explicit CalibrationPage(QWidget* parent = nullptr);

  // Copies the choices into spec's calibration fields.
  void apply(QuantizeSpec* spec) const;
  void setFile(const QString& path);  // empty: the built-in set
  void setSize(int samples, int tokens);
  // The saved conversations to offer (not owned; null: none). The count follows the store.
  void setConversations(ConversationStore* store);
  // Chooses the saved conversations; false (nothing changes) when there are none.
  bool useConversations();
  int conversationCount() const;
  QString conversationsNote() const;  // the line under the option: what it does, or why it is off
  MessageBanner* banner() const { return m_banner; }
  // Refuses, with the reason in the banner, a file that does not exist or saved conversations
  // without text; writes the conversations' JSONL.
  bool validatePage() override;

  // <CacheLocation>/calibration/saved-conversations.jsonl (rewritten at each Next).
  static QString conversationsCalibrationPath();

 private:
  void updateConversations();

  ConversationStore* m_store = nullptr;
  MessageBanner* m_banner = nullptr;
  QRadioButton* m_builtin = nullptr;
  QRadioButton* m_fromFile = nullptr;
  QRadioButton* m_fromConversations = nullptr;
  QLabel* m_conversationsNote = nullptr;
  QLineEdit* m_file = nullptr;
  QSpinBox* m_samples = nullptr;
  QSpinBox* m_tokens = nullptr;
};

}  // namespace lathe::ui
