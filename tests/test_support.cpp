#include "test_support.h"

#include <QProcess>

#include "engine/model/model_loader.h"

namespace lathe::test {

std::string default_model_path() {
  return lathe::default_model_path();
}

ProcessResult run_process(const QString& program, const QStringList& args, int timeout_ms) {
  QProcess p;
  p.start(program, args);
  ProcessResult r;
  if (!p.waitForFinished(timeout_ms)) {
    p.kill();
    p.waitForFinished();
    r.err = "timed out";
    return r;
  }
  r.exit_code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
  r.out = QString::fromUtf8(p.readAllStandardOutput());
  r.err = QString::fromUtf8(p.readAllStandardError());
  return r;
}

}  // namespace lathe::test
