// Saved comparisons: every finished run as one JSON file (compare_run.h's format) in
// <AppDataLocation>/compare-runs, named by its finish time ("20250501-120000-123.json", UTC), so
// names sort by age. Plain functions that do file I/O: the Compare tab calls them on its I/O
// thread, never on the GUI thread. Files are written atomically (QSaveFile: temporary, fsync,
// rename): a crash leaves the old file or the new one.
#pragma once

#include <QDateTime>
#include <QString>
#include <QVector>

#include "ui/compare/compare_run.h"

namespace lathe::ui {

// <AppDataLocation>/compare-runs (created on the first save).
QString defaultCompareRunsFolder();

// Writes `run` into `folder` (created when missing) under a name from run.finished (a "-2", "-3"
// suffix when taken). Returns the file's path, or empty with *error naming the file and the cause.
QString saveCompareRun(const QString& folder, const CompareRun& run, QString* error);

// Reads and checks one saved run. False with *error = "<file name>: <what is wrong>" (a file that
// cannot be opened, or compareFromJson's reason).
bool loadCompareRun(const QString& path, CompareRun* out, QString* error);

struct SavedCompareRun {
  QString path;
  QString label;  // "2025-05-01 14:03 — a.gguf vs b.gguf" (local time); the file name if unreadable
};

// The newest `max` runs in `folder`, newest first. Reads each listed file for its label.
QVector<SavedCompareRun> listCompareRuns(const QString& folder, int max);

}  // namespace lathe::ui
