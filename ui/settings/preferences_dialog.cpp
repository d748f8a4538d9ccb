#include "ui/settings/preferences_dialog.h"

#include <QComboBox>
#include <QDesktopServices>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QThread>
#include <QUrl>

#include "ui/settings/preset_store.h"

namespace lathe::ui {

Preferences Preferences::load() {
  QSettings s;
  Preferences p;
  const QString startup =
      s.value(QStringLiteral("startup/model"), QStringLiteral("default")).toString();
  p.startup = startup == QLatin1String("last")   ? Startup::kLastModel
              : startup == QLatin1String("none") ? Startup::kNothing
                                                 : Startup::kDefaultModel;
  p.cpuThreads = qMax(0, s.value(QStringLiteral("engine/cpuThreads"), 0).toInt());
  parseAppearance(s.value(QStringLiteral("appearance"), QStringLiteral("system")).toString(),
                  &p.appearance);
  return p;
}

void Preferences::save() const {
  QSettings s;
  s.setValue(QStringLiteral("startup/model"),
             startup == Startup::kLastModel ? QStringLiteral("last")
             : startup == Startup::kNothing ? QStringLiteral("none")
                                            : QStringLiteral("default"));
  s.setValue(QStringLiteral("engine/cpuThreads"), cpuThreads);
  s.setValue(QStringLiteral("appearance"), QString::fromLatin1(appearanceName(appearance)));
}

PreferencesDialog::PreferencesDialog(PresetStore* presets, const QString& conversationsFolder,
                                     QWidget* parent)
    : QDialog(parent), m_presets(presets) {
  setWindowTitle(tr("Preferences"));
  const Preferences p = Preferences::load();
  auto* form = new QFormLayout(this);
  m_startup = new QComboBox;
  m_startup->addItem(tr("Load the default model (SmolLM2-135M-Instruct)"));
  m_startup->addItem(tr("Load the most recent model"));
  m_startup->addItem(tr("Load nothing"));
  m_startup->setCurrentIndex(static_cast<int>(p.startup));
  form->addRow(tr("At startup:"), m_startup);

  m_threads = new QSpinBox;
  m_threads->setRange(0, 1024);
  m_threads->setSpecialValueText(
      tr("automatic (%1: all cores but one)").arg(qMax(1, QThread::idealThreadCount() - 1)));
  m_threads->setValue(p.cpuThreads);
  m_threads->setToolTip(
      tr("Threads of the CPU backend. One core is left for the window by default "
         "so it stays responsive while the model computes."));
  form->addRow(tr("CPU threads:"), m_threads);

  m_appearance = new QComboBox;
  m_appearance->addItem(tr("Follow the system"), QStringLiteral("system"));
  m_appearance->addItem(tr("Light"), QStringLiteral("light"));
  m_appearance->addItem(tr("Dark"), QStringLiteral("dark"));
  m_appearance->setCurrentIndex(
      m_appearance->findData(QString::fromLatin1(appearanceName(p.appearance))));
  form->addRow(tr("Appearance:"), m_appearance);

  m_defaultPreset = new QComboBox;
  m_defaultPreset->addItems(m_presets->names());
  m_defaultPreset->setCurrentText(m_presets->defaultPresetName());
  form->addRow(tr("Default load preset:"), m_defaultPreset);

  auto* folderRow = new QHBoxLayout;
  auto* folder = new QLabel(conversationsFolder);
  folder->setTextInteractionFlags(Qt::TextSelectableByMouse);
  folder->setWordWrap(true);
  auto* openFolder = new QPushButton(tr("Open"));
  connect(openFolder, &QPushButton::clicked, this, [conversationsFolder] {
    QDesktopServices::openUrl(QUrl::fromLocalFile(conversationsFolder));
  });
  folderRow->addWidget(folder, 1);
  folderRow->addWidget(openFolder);
  form->addRow(tr("Conversations:"), folderRow);

  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
  form->addRow(buttons);
  connect(buttons, &QDialogButtonBox::accepted, this, [this] {
    preferences().save();
    m_presets->setDefaultPreset(m_defaultPreset->currentText());
    accept();
  });
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
}

Preferences PreferencesDialog::preferences() const {
  Preferences p;
  p.startup = static_cast<Preferences::Startup>(m_startup->currentIndex());
  p.cpuThreads = m_threads->value();
  parseAppearance(m_appearance->currentData().toString(), &p.appearance);
  return p;
}

}  // namespace lathe::ui
