#include "ui/settings/appearance.h"

#include <QApplication>
#include <QPalette>
#include <QStyle>
#include <QStyleFactory>

namespace lathe::ui {

namespace {

struct StartupLook {
  QString styleName;
  QPalette palette;
  bool captured = false;
};

StartupLook& startupLook() {
  static StartupLook look;
  if (!look.captured) {
    look.styleName = QApplication::style()->name();
    look.palette = QApplication::palette();
    look.captured = true;
  }
  return look;
}

QPalette darkPalette() {
  const QColor window(0x2b, 0x2d, 0x31);
  const QColor base(0x1f, 0x21, 0x24);
  const QColor text(0xe6, 0xe6, 0xe6);
  const QColor disabled(0x80, 0x80, 0x80);
  const QColor highlight(0x3b, 0x82, 0xf6);
  QPalette p;
  p.setColor(QPalette::Window, window);
  p.setColor(QPalette::WindowText, text);
  p.setColor(QPalette::Base, base);
  p.setColor(QPalette::AlternateBase, window);
  p.setColor(QPalette::ToolTipBase, base);
  p.setColor(QPalette::ToolTipText, text);
  p.setColor(QPalette::PlaceholderText, QColor(0x9a, 0x9a, 0x9a));
  p.setColor(QPalette::Text, text);
  p.setColor(QPalette::Button, window);
  p.setColor(QPalette::ButtonText, text);
  p.setColor(QPalette::BrightText, Qt::white);
  p.setColor(QPalette::Light, QColor(0x45, 0x47, 0x4c));
  p.setColor(QPalette::Midlight, QColor(0x3a, 0x3c, 0x41));
  p.setColor(QPalette::Mid, QColor(0x5a, 0x5d, 0x63));
  p.setColor(QPalette::Dark, QColor(0x18, 0x19, 0x1b));
  p.setColor(QPalette::Shadow, Qt::black);
  p.setColor(QPalette::Highlight, highlight);
  p.setColor(QPalette::HighlightedText, Qt::white);
  p.setColor(QPalette::Link, QColor(0x60, 0xa5, 0xfa));
  p.setColor(QPalette::LinkVisited, QColor(0xa7, 0x8b, 0xfa));
  for (auto role : {QPalette::WindowText, QPalette::Text, QPalette::ButtonText})
    p.setColor(QPalette::Disabled, role, disabled);
  return p;
}

}  // namespace

const char* appearanceName(Appearance a) {
  switch (a) {
    case Appearance::kLight:
      return "light";
    case Appearance::kDark:
      return "dark";
    case Appearance::kSystem:
      break;
  }
  return "system";
}

bool parseAppearance(const QString& name, Appearance* out) {
  if (name == QLatin1String("system"))
    *out = Appearance::kSystem;
  else if (name == QLatin1String("light"))
    *out = Appearance::kLight;
  else if (name == QLatin1String("dark"))
    *out = Appearance::kDark;
  else
    return false;
  return true;
}

void applyAppearance(Appearance a) {
  const StartupLook& look = startupLook();
  switch (a) {
    case Appearance::kSystem:
      QApplication::setStyle(QStyleFactory::create(look.styleName));
      QApplication::setPalette(look.palette);
      break;
    case Appearance::kLight:
      QApplication::setStyle(QStyleFactory::create(QStringLiteral("Fusion")));
      QApplication::setPalette(QApplication::style()->standardPalette());
      break;
    case Appearance::kDark:
      QApplication::setStyle(QStyleFactory::create(QStringLiteral("Fusion")));
      QApplication::setPalette(darkPalette());
      break;
  }
}

}  // namespace lathe::ui
