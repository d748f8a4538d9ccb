// Helpers shared by the Lathe Studio GUI tests: isolated settings and data folders, a probe that
// measures how long the event loop goes without running, and the paths of the default model and
// the `lathe` CLI.
#pragma once

#include <QCoreApplication>
#include <QCryptographicHash>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QSettings>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTimer>

#include <algorithm>
#include <cstdio>

#include "test_support.h"

namespace lathe::ui::test {

// Points QSettings and QStandardPaths at fresh temporary folders so a test never reads or writes
// the user's real settings, recent models or conversations. Call first, before any widget exists.
inline void isolateSettings(const QTemporaryDir& dir) {
  QStandardPaths::setTestModeEnabled(true);
  QCoreApplication::setOrganizationName(QStringLiteral("LatheTest"));
  // One data folder per test executable file (QStandardPaths' test mode is per user, not per
  // process): executables that CTest runs side by side never see each other's saved files, nor do
  // the same test of two build trees (worktrees) run at once. The folder outlives the run.
  const QString exe = QCoreApplication::applicationFilePath();
  const QByteArray where =
      QCryptographicHash::hash(exe.toUtf8(), QCryptographicHash::Sha1).toHex().left(8);
  QCoreApplication::setApplicationName(QStringLiteral("Lathe Studio Test ") +
                                       QFileInfo(exe).baseName() + ' ' +
                                       QString::fromLatin1(where));
  QSettings::setDefaultFormat(QSettings::IniFormat);
  QSettings::setPath(QSettings::IniFormat, QSettings::UserScope,
                     dir.filePath(QStringLiteral("settings")));
  QSettings().clear();
}

// Measures the longest gap between two runs of a `periodMs` timer: how long the event loop was
// unable to process events (a frozen window shows up as a large gap).
// Under the sanitizers (time_scale() > 1, test_support.h: scripts/sanitize.sh runs instrumented
// tests side by side, at nice 19, next to other builds) a gap leaves out the time the GUI thread
// was ready to run but waiting for a CPU (Linux schedstat's run-queue delay): what remains is the
// process's own doing, work or blocking on the GUI thread. Normal runs measure wall-clock gaps.
class ResponsivenessProbe : public QObject {
 public:
  explicit ResponsivenessProbe(int periodMs = 5)
      : m_netOfRunQueue(lathe::test::time_scale() > 1.0) {
    m_timer.setInterval(periodMs);
    m_timer.setTimerType(Qt::PreciseTimer);
    QObject::connect(&m_timer, &QTimer::timeout, this, [this] {
      const qint64 now = m_clock.nsecsElapsed();
      const qint64 waited = m_netOfRunQueue ? runQueueDelayNs() : 0;
      if (m_last >= 0) m_maxGapNs = std::max(m_maxGapNs, now - m_last - (waited - m_lastWaited));
      m_last = now;
      m_lastWaited = waited;
      ++m_ticks;
    });
  }
  void start() {
    m_maxGapNs = 0;
    m_last = -1;
    m_ticks = 0;
    m_clock.start();
    m_timer.start();
  }
  void stop() { m_timer.stop(); }
  double maxGapMs() const { return static_cast<double>(m_maxGapNs) / 1e6; }
  int ticks() const { return m_ticks; }

 private:
  // Nanoseconds this thread has waited on a run queue (the second field of
  // /proc/thread-self/schedstat); 0 where that file cannot be read.
  static qint64 runQueueDelayNs() {
    FILE* f = std::fopen("/proc/thread-self/schedstat", "r");
    if (f == nullptr) return 0;
    unsigned long long onCpu = 0, waited = 0;
    const int n = std::fscanf(f, "%llu %llu", &onCpu, &waited);
    std::fclose(f);
    return n == 2 ? static_cast<qint64>(waited) : 0;
  }

  const bool m_netOfRunQueue;
  QTimer m_timer;
  QElapsedTimer m_clock;
  qint64 m_last = -1;
  qint64 m_lastWaited = 0;
  qint64 m_maxGapNs = 0;
  int m_ticks = 0;
};

}  // namespace lathe::ui::test

#include <QDragEnterEvent>
#include <QDropEvent>
#include <QMimeData>
#include <QUrl>
#include <QWidget>

#include <memory>

namespace lathe::ui::test {

// Drags `path` over `target` and drops it, as a file manager would. Returns whether the window
// accepted the drag.
inline bool dropFile(QWidget* target, const QString& path) {
  auto mime = std::make_unique<QMimeData>();
  mime->setUrls({QUrl::fromLocalFile(path)});
  const QPoint pos = target->rect().center();
  QDragEnterEvent enter(pos, Qt::CopyAction, mime.get(), Qt::LeftButton, Qt::NoModifier);
  QCoreApplication::sendEvent(target, &enter);
  if (!enter.isAccepted()) return false;
  QDropEvent drop(QPointF(pos), Qt::CopyAction, mime.get(), Qt::LeftButton, Qt::NoModifier);
  QCoreApplication::sendEvent(target, &drop);
  return drop.isAccepted();
}

}  // namespace lathe::ui::test
