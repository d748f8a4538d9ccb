#include "ui/common/message_banner.h"

#include <QEvent>
#include <QHBoxLayout>
#include <QIcon>
#include <QLabel>
#include <QStyle>
#include <QToolButton>

namespace lathe::ui {

MessageBanner::MessageBanner(QWidget* parent) : QFrame(parent) {
  setFrameShape(QFrame::StyledPanel);
  setAutoFillBackground(true);
  auto* row = new QHBoxLayout(this);
  row->setContentsMargins(8, 4, 4, 4);
  m_icon = new QLabel;
  m_text = new QLabel;
  m_text->setObjectName(QStringLiteral("bannerText"));
  m_text->setWordWrap(true);
  m_text->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_close = new QToolButton;
  m_close->setAutoRaise(true);
  m_close->setIcon(style()->standardIcon(QStyle::SP_TitleBarCloseButton));
  m_close->setToolTip(tr("Dismiss"));
  row->addWidget(m_icon, 0, Qt::AlignTop);
  row->addWidget(m_text, 1);
  row->addWidget(m_close, 0, Qt::AlignTop);
  connect(m_close, &QToolButton::clicked, this, [this] {
    clear();
    emit closed();
  });
  hide();
}

void MessageBanner::showMessage(Kind kind, const QString& text, bool closable) {
  m_kind = kind;
  m_text->setText(text);
  m_close->setVisible(closable);
  const QString icon = kind == Kind::kError     ? QStringLiteral(":/icons/error.svg")
                       : kind == Kind::kWarning ? QStringLiteral(":/icons/warning.svg")
                                                : QString();
  m_icon->setPixmap(icon.isEmpty() ? QPixmap() : QIcon(icon).pixmap(20, 20));
  m_icon->setVisible(!icon.isEmpty());
  applyStyle();
  show();
}

void MessageBanner::clear() {
  m_text->clear();
  hide();
}

QString MessageBanner::text() const {
  return isVisibleTo(parentWidget()) ? m_text->text() : QString();
}

void MessageBanner::changeEvent(QEvent* event) {
  QFrame::changeEvent(event);
  if (event->type() == QEvent::PaletteChange) applyStyle();
}

void MessageBanner::applyStyle() {
  // A tint of the message color over the window color: readable in light and dark palettes.
  const QColor base = parentWidget() ? parentWidget()->palette().color(QPalette::Window)
                                     : palette().color(QPalette::Window);
  const QColor accent = m_kind == Kind::kError     ? QColor(0xdc, 0x26, 0x26)
                        : m_kind == Kind::kWarning ? QColor(0xd9, 0x77, 0x06)
                                                   : QColor(0x3b, 0x82, 0xf6);
  const auto mix = [](int a, int b) { return (a * 80 + b * 20) / 100; };
  const QColor tint(mix(base.red(), accent.red()), mix(base.green(), accent.green()),
                    mix(base.blue(), accent.blue()));
  QPalette pal = palette();
  if (pal.color(QPalette::Window) != tint) {
    pal.setColor(QPalette::Window, tint);
    setPalette(pal);
  }
}

}  // namespace lathe::ui
