#include "test_support.h"

#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
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
  if (!p.waitForFinished(scaled_ms(timeout_ms))) {
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

std::string config_with_layers(const std::string& config_dir, const QString& out_dir, int layers) {
  QFile in(QString::fromStdString(config_dir) + "/config.json");
  if (!in.open(QIODevice::ReadOnly)) return "";
  QJsonObject config = QJsonDocument::fromJson(in.readAll()).object();
  config["num_hidden_layers"] = layers;
  QFile out(out_dir + "/config.json");
  if (!out.open(QIODevice::WriteOnly) || out.write(QJsonDocument(config).toJson()) < 0) return "";
  return out_dir.toStdString();
}

}  // namespace lathe::test
