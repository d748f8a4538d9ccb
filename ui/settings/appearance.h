// Appearance: follow the system palette (the default), or force light or dark. Qt 6.4 follows the
// desktop's palette where its platform theme reports one (KDE; GNOME via a Qt platform theme); on
// desktops where it does not, "dark" gives a dark Fusion palette. Widgets that draw their own
// colors (charts, banners) re-read the palette on QEvent::PaletteChange, so switching is live.
#pragma once

#include <QString>

namespace lathe::ui {

enum class Appearance { kSystem, kLight, kDark };

const char* appearanceName(Appearance a);  // "system", "light", "dark"
// Parses a name; false for anything else.
bool parseAppearance(const QString& name, Appearance* out);

// Applies it to the running application (QApplication must exist). kSystem restores the style and
// palette the application started with.
void applyAppearance(Appearance appearance);

}  // namespace lathe::ui
