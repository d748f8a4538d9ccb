// An inline, non-modal message strip (error, warning or information) with an optional action
// link and a close button. Errors shown here never block the window, unlike a modal dialog.
#pragma once

#include <QFrame>

class QLabel;
class QToolButton;

namespace lathe::ui {

class MessageBanner : public QFrame {
  Q_OBJECT
 public:
  enum class Kind { kError, kWarning, kInfo };

  explicit MessageBanner(QWidget* parent = nullptr);

  // Shows `text` (plain text; escaped). `closable`: whether the user can dismiss it.
  void showMessage(Kind kind, const QString& text, bool closable = true);
  void clear();  // hides it
  QString text() const;
  Kind kind() const { return m_kind; }

 signals:
  void closed();

 protected:
  void changeEvent(QEvent* event) override;

 private:
  void applyStyle();

  Kind m_kind = Kind::kInfo;
  QLabel* m_icon = nullptr;
  QLabel* m_text = nullptr;
  QToolButton* m_close = nullptr;
};

}  // namespace lathe::ui
