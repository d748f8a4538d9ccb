// Crash safety of every file Lathe writes that a user keeps (docs/RELIABILITY.md): a writer is
// forked, writes ever newer versions of one file in a loop, and is killed with SIGKILL at a random
// moment; the file must then hold one complete version, never a torn mix, and never go back to an
// older version. Writers: the engine's write_file_atomically (benchmark results; quantized outputs
// use the same fsync helpers), ConversationStore (QSaveFile) and PresetStore (QSettings).
// LATHE_KILL_TEST_ITERATIONS sets the kills per writer (default 25).
#include <QtTest>

#include <QDir>
#include <QSettings>
#include <QTemporaryDir>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <iterator>
#include <random>

#include "engine/core/atomic_file.h"
#include "ui/chat/conversation_store.h"
#include "ui/settings/preset_store.h"

using namespace lathe;
using namespace lathe::ui;

namespace {

int iterations() {
  const int n = qEnvironmentVariableIntValue("LATHE_KILL_TEST_ITERATIONS");
  return n > 0 ? n : 25;
}

struct KillStats {
  int kills = 0;
  int versions_seen = 0;  // distinct versions found after kills (progress was made)
  int torn = 0;
};

// Forks `write(v)` for v = start, start + 1, ... until killed after a random delay (up to
// max_delay_us), then asks `check` which version the file holds (-1: torn or unreadable). The
// first check may find no file (-2) only before anything was ever written.
KillStats kill_writer_repeatedly(const std::function<void(int)>& write,
                                 const std::function<int()>& check, int max_delay_us) {
  KillStats s;
  std::mt19937 rng(12345);
  int last = -2;
  int start = 0;
  for (int i = 0; i < iterations(); ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      for (int v = start;; ++v) write(v);
    }
    if (pid < 0) qFatal("fork failed");
    ::usleep(std::uniform_int_distribution<int>(0, max_delay_us)(rng));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ++s.kills;
    const int v = check();
    if (v == -1 || (v == -2 && last >= 0) || v < last) {
      ++s.torn;
      qWarning("kill %d: found version %d after version %d", i, v, last);
    }
    if (v > last) ++s.versions_seen;
    last = std::max(last, v);
    // The next writer starts past every version a killed one may have reached.
    start = std::max(start, last + 1) + 1000000;
  }
  return s;
}

// Every kill left an old or new version; with `progress`, later kills found newer versions too.
void expect_never_torn(const char* writer, const KillStats& s, bool progress) {
  qInfo("%s: %d kills, %d newer versions found, %d torn", writer, s.kills, s.versions_seen, s.torn);
  QCOMPARE(s.torn, 0);
  if (progress) QVERIFY(s.versions_seen > 1);
}

std::string slurp(const QString& path) {
  std::ifstream in(path.toStdString(), std::ios::binary);
  if (!in) return {};
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

class CrashSafetyTest : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;

 private slots:
  void engineAtomicFileIsOldOrNew() {
    const QString path = m_dir.filePath("results.json");
    // Version v: a header naming v and its length, then 64-192 KiB of one byte derived from v.
    auto contents = [](int v) {
      const size_t n = 65536 + static_cast<size_t>(v % 128) * 1024;
      return "v=" + std::to_string(v) + ";n=" + std::to_string(n) + ";" +
             std::string(n, static_cast<char>('a' + v % 26));
    };
    auto write = [&](int v) {
      if (!write_file_atomically(path.toStdString(), contents(v)).is_ok()) _exit(3);
    };
    auto check = [&]() -> int {
      if (!QFile::exists(path)) return -2;
      const std::string s = slurp(path);
      int v = -1;
      size_t n = 0;
      if (std::sscanf(s.c_str(), "v=%d;n=%zu;", &v, &n) != 2) return -1;
      return s == contents(v) ? v : -1;
    };
    expect_never_torn("write_file_atomically", kill_writer_repeatedly(write, check, 20000), true);
  }

  void conversationStoreIsOldOrNew() {
    const QString folder = m_dir.filePath("conversations");
    Conversation c = Conversation::create();
    // Version v: title "v<v>" and 1 + v % 97 messages of 2000 copies of one letter.
    auto make = [c](int v) {
      Conversation x = c;
      x.title = QStringLiteral("v%1").arg(v);
      x.messages.clear();
      for (int i = 0; i <= v % 97; ++i)
        x.messages.push_back({i % 2 ? QStringLiteral("assistant") : QStringLiteral("user"),
                              QString(2000, QChar('a' + v % 26)), std::nullopt});
      return x;
    };
    auto write = [&](int v) {
      ConversationStore store(folder);
      if (!store.save(make(v))) _exit(3);
    };
    auto check = [&]() -> int {
      if (!QFile::exists(folder + "/" + c.id + ".json")) return -2;
      ConversationStore store(folder);
      Conversation back;
      if (!store.lastError().isEmpty() || !store.load(c.id, &back)) return -1;
      bool ok = false;
      const int v = back.title.mid(1).toInt(&ok);
      if (!ok) return -1;
      const Conversation want = make(v);
      if (back.messages.size() != want.messages.size()) return -1;
      for (int i = 0; i < back.messages.size(); ++i)
        if (back.messages[i].content != want.messages[i].content) return -1;
      return v;
    };
    expect_never_torn("ConversationStore", kill_writer_repeatedly(write, check, 30000), true);
  }

  void presetStoreIsOldOrNew() {
    const QString path = m_dir.filePath("settings.ini");
    {
      // 200 other presets, so every save rewrites a file of some size.
      QSettings settings(path, QSettings::IniFormat);
      PresetStore store(&settings);
      for (int i = 0; i < 200; ++i) {
        LoadSettings ls;
        ls.maxModelLen = 4096 + i;
        QVERIFY(store.save(QStringLiteral("fixed-%1").arg(i), ls));
      }
    }
    auto write = [&](int v) {
      QSettings settings(path, QSettings::IniFormat);
      PresetStore store(&settings);
      LoadSettings ls;
      ls.maxModelLen = 1000 + v % 100000;
      ls.maxNumSeqs = 1 + v % 200;
      ls.maxNumBatchedTokens = 16 + v % 100000;
      if (!store.save(QStringLiteral("live"), ls)) _exit(3);
    };
    int base = 0;  // versions are compared modulo 100000 (the field's range); writers advance it
    auto check = [&]() -> int {
      if (!QFile::exists(path)) return -2;
      QSettings settings(path, QSettings::IniFormat);
      if (settings.status() != QSettings::NoError) return -1;
      PresetStore store(&settings);
      for (int i = 0; i < 200; ++i)
        if (store.preset(QStringLiteral("fixed-%1").arg(i)).maxModelLen != 4096 + i) return -1;
      if (!store.contains(QStringLiteral("live"))) return -2;
      const LoadSettings ls = store.preset(QStringLiteral("live"));
      const int m = ls.maxModelLen - 1000;
      if (ls.maxNumSeqs != 1 + m % 200 || ls.maxNumBatchedTokens != 16 + m) return -1;
      return ++base;  // consistent: count it as a new version
    };
    expect_never_torn("PresetStore (QSettings)", kill_writer_repeatedly(write, check, 20000),
                      false);
  }

  void corruptFileIsSetAside() {
    const QString path = m_dir.filePath("broken.json");
    {
      QFile f(path);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write("{ torn");
    }
    Result<std::string> aside = set_aside_corrupt_file(path.toStdString());
    QVERIFY(aside.is_ok());
    QVERIFY(!QFile::exists(path));
    QCOMPARE(slurp(QString::fromStdString(*aside)), std::string("{ torn"));
    QVERIFY(aside->find("broken.json.corrupt-") != std::string::npos);
    // Missing file: an error naming it.
    Result<std::string> missing = set_aside_corrupt_file(path.toStdString());
    QVERIFY(!missing.is_ok());
    QVERIFY(missing.status().message().find("broken.json") != std::string::npos);
  }

  void failedWriteKeepsThePreviousFile() {
    const QString path = m_dir.filePath("keep.json");
    QVERIFY(write_file_atomically(path.toStdString(), "old").is_ok());
    // A file size limit makes the write fail part-way, as a full disk does.
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::signal(SIGXFSZ, SIG_IGN);
      rlimit lim{4096, 4096};
      ::setrlimit(RLIMIT_FSIZE, &lim);
      const Status st = write_file_atomically(path.toStdString(), std::string(100000, 'n'));
      _exit(!st.is_ok() && st.message().find("keep.json") != std::string::npos ? 0 : 1);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    QVERIFY(WIFEXITED(status));
    QCOMPARE(WEXITSTATUS(status), 0);
    QCOMPARE(slurp(path), std::string("old"));
    QCOMPARE(QDir(m_dir.path()).entryList({"keep.json.tmp-*"}).size(), 0);  // temporary removed
    // A folder that does not exist: an error naming the file.
    const Status missing =
        write_file_atomically(m_dir.filePath("missing/x.json").toStdString(), "new");
    QVERIFY(!missing.is_ok());
    QVERIFY(missing.message().find("missing/x.json") != std::string::npos);
  }
};

QTEST_GUILESS_MAIN(CrashSafetyTest)
#include "crash_safety_test.moc"
