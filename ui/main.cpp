// lathe-studio [MODEL]: Lathe Studio, the desktop workbench. With MODEL (a .gguf file or a Hugging
// Face folder) it opens and loads that model; without, it does what Preferences ▸ At startup says
// (by default: load the default model, SmolLM2-135M-Instruct Q4_1, when it is in the model cache).
#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QTimer>

#include <cstdio>

#include "ui/app/main_window.h"
#include "ui/app/screenshot_tour.h"
#include "ui/bridge/engine_bridge.h"
#include "ui/common/message_banner.h"
#include "ui/models/models_panel.h"
#include "ui/models/recent_models.h"
#include "ui/settings/appearance.h"
#include "ui/settings/preferences_dialog.h"

using namespace lathe::ui;

namespace {

void setIdentity() {
  QCoreApplication::setOrganizationName(QStringLiteral("Lathe"));
  QCoreApplication::setOrganizationDomain(QStringLiteral("lathe.org"));
  QCoreApplication::setApplicationName(QStringLiteral("Lathe Studio"));
  QCoreApplication::setApplicationVersion(QStringLiteral(LATHE_VERSION));
}

struct Options {
  QCommandLineOption noLoad{QStringLiteral("no-load"),
                            QStringLiteral("Show the model's card without loading it.")};
  QCommandLineOption screenshots{
      QStringLiteral("screenshots"),
      QStringLiteral("Load the model, run traffic, save a PNG of each page into DIR and quit."),
      QStringLiteral("DIR")};
  QCommandLineOption appearance{
      QStringLiteral("appearance"),
      QStringLiteral("system, light or dark (overrides Preferences for this run)."),
      QStringLiteral("NAME")};
};

void describe(QCommandLineParser& parser, const Options& o) {
  parser.setApplicationDescription(QStringLiteral(
      "Lathe Studio: inspect, load, chat with, serve and watch LLMs (GGUF files and Hugging Face "
      "folders)."));
  parser.addHelpOption();
  parser.addVersionOption();
  parser.addPositionalArgument(
      QStringLiteral("model"),
      QStringLiteral("A .gguf file or a Hugging Face model folder to load."),
      QStringLiteral("[MODEL]"));
  parser.addOption(o.noLoad);
  parser.addOption(o.screenshots);
  parser.addOption(o.appearance);
}

}  // namespace

int main(int argc, char** argv) {
  const Options options;
  // --help and --version answer without a display.
  for (int i = 1; i < argc; ++i) {
    const QByteArray arg(argv[i]);
    if (arg == "-h" || arg == "--help" || arg == "--help-all" || arg == "-v" ||
        arg == "--version") {
      QCoreApplication info(argc, argv);
      setIdentity();
      QCommandLineParser parser;
      describe(parser, options);
      parser.process(info);  // prints and exits
      return 0;
    }
  }

  QApplication app(argc, argv);
  setIdentity();
  QApplication::setDesktopFileName(QStringLiteral("org.lathe.Studio"));
  QApplication::setWindowIcon(QIcon(QStringLiteral(":/icons/lathe-studio.svg")));
  QCommandLineParser parser;
  describe(parser, options);
  parser.process(app);
  const QCommandLineOption& noLoad = options.noLoad;
  const QCommandLineOption& screenshots = options.screenshots;
  const QCommandLineOption& appearance = options.appearance;

  EngineBridge bridge;
  Preferences prefs = Preferences::load();
  if (parser.isSet(appearance) && !parseAppearance(parser.value(appearance), &prefs.appearance)) {
    std::fprintf(stderr, "lathe-studio: --appearance must be system, light or dark, got '%s'\n",
                 qPrintable(parser.value(appearance)));
    return 2;
  }
  if (prefs.appearance != Appearance::kSystem) applyAppearance(prefs.appearance);
  bridge.setCpuThreads(prefs.cpuThreads);
  MainWindow window(&bridge);
  window.show();

  const bool load = !parser.isSet(noLoad);
  QString model = parser.positionalArguments().value(0);
  if (model.isEmpty() &&
      (parser.isSet(screenshots) || prefs.startup == Preferences::Startup::kDefaultModel)) {
    QString error;
    model = EngineBridge::defaultModelPath(&error);
    if (model.isEmpty())
      window.models()->banner()->showMessage(MessageBanner::Kind::kWarning, error);
  } else if (model.isEmpty() && prefs.startup == Preferences::Startup::kLastModel) {
    RecentModels recent;
    model = recent.paths().value(0);
  }
  if (!model.isEmpty()) window.openModel(QDir::current().absoluteFilePath(model), load);

  if (parser.isSet(screenshots)) {
    if (model.isEmpty()) {
      std::fprintf(stderr,
                   "lathe-studio: --screenshots needs a model (none given, default missing)\n");
      return 1;
    }
    auto* tour = new ScreenshotTour(&window, &bridge, parser.value(screenshots), &app);
    QObject::connect(tour, &ScreenshotTour::finished, &app, [](bool ok, const QString& message) {
      std::fprintf(ok ? stdout : stderr, "lathe-studio: screenshots: %s\n", qPrintable(message));
      QApplication::exit(ok ? 0 : 1);
    });
  }
  return app.exec();
}
