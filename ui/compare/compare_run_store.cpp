#include "ui/compare/compare_run_store.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QSaveFile>
#include <QStandardPaths>

#include <algorithm>

namespace lathe::ui {

namespace {
constexpr qint64 kMaxRunFileBytes = 64LL << 20;  // a run with 4 variants is a few kB
}  // namespace

QString defaultCompareRunsFolder() {
  return QStandardPaths::writableLocation(QStandardPaths::AppDataLocation) +
         QStringLiteral("/compare-runs");
}

QString saveCompareRun(const QString& folder, const CompareRun& run, QString* error) {
  if (!QDir().mkpath(folder)) {
    if (error)
      *error = QObject::tr("Cannot create the folder %1 for saved comparisons").arg(folder);
    return {};
  }
  const QDateTime when = run.finished.isValid() ? run.finished : QDateTime::currentDateTimeUtc();
  const QString stem = when.toUTC().toString(QStringLiteral("yyyyMMdd-HHmmss-zzz"));
  const QDir dir(folder);
  QString path = dir.filePath(stem + QStringLiteral(".json"));
  for (int n = 2; QFile::exists(path); ++n)
    path = dir.filePath(QStringLiteral("%1-%2.json").arg(stem).arg(n));
  const QByteArray bytes = compareToJson(run);
  QSaveFile file(path);
  if (!file.open(QIODevice::WriteOnly) || file.write(bytes) != bytes.size() || !file.commit()) {
    if (error)
      *error = QObject::tr("Cannot save the comparison to %1: %2").arg(path, file.errorString());
    return {};
  }
  return path;
}

bool loadCompareRun(const QString& path, CompareRun* out, QString* error) {
  const QString name = QFileInfo(path).fileName();
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) {
    if (error) *error = QObject::tr("%1: cannot open it (%2)").arg(name, file.errorString());
    return false;
  }
  if (file.size() > kMaxRunFileBytes) {
    if (error)
      *error = QObject::tr("%1: %2 MiB is far larger than a saved comparison; not read")
                   .arg(name)
                   .arg(file.size() >> 20);
    return false;
  }
  QString why;
  if (!compareFromJson(file.readAll(), out, &why)) {
    if (error) *error = QObject::tr("%1: %2").arg(name, why);
    return false;
  }
  return true;
}

QVector<SavedCompareRun> listCompareRuns(const QString& folder, int max) {
  QStringList names = QDir(folder).entryList({QStringLiteral("*.json")}, QDir::Files, QDir::Name);
  std::reverse(names.begin(), names.end());  // names are times: newest first
  QVector<SavedCompareRun> out;
  for (const QString& name : names) {
    if (out.size() >= max) break;
    const QString path = QDir(folder).filePath(name);
    CompareRun run;
    QString label = name;
    if (loadCompareRun(path, &run, nullptr)) {
      QStringList models;
      for (const CompareVariant& v : run.variants) models << v.name;
      label = QObject::tr("%1 — %2").arg(
          QLocale().toString(run.finished.toLocalTime(), QLocale::ShortFormat),
          models.join(QObject::tr(" vs ")));
    }
    out.push_back({path, label});
  }
  return out;
}

}  // namespace lathe::ui
