#include "ui/models/model_drop.h"

#include <QFileInfo>
#include <QMimeData>
#include <QUrl>

namespace lathe::ui {

QString modelPathForLocalFile(const QString& localPath) {
  const QFileInfo info(localPath);
  if (localPath.isEmpty() || !info.exists()) return {};
  if (info.isDir()) return info.absoluteFilePath();
  const QString name = info.fileName().toLower();
  if (name.endsWith(QLatin1String(".gguf"))) return info.absoluteFilePath();
  if (name.endsWith(QLatin1String(".safetensors")) || name == QLatin1String("config.json") ||
      name == QLatin1String("model.safetensors.index.json") ||
      name == QLatin1String("tokenizer.json") || name == QLatin1String("tokenizer_config.json"))
    return info.absolutePath();
  return {};
}

QString modelPathFromMimeData(const QMimeData* mime) {
  if (mime == nullptr || !mime->hasUrls()) return {};
  for (const QUrl& url : mime->urls()) {
    if (!url.isLocalFile()) continue;
    const QString path = modelPathForLocalFile(url.toLocalFile());
    if (!path.isEmpty()) return path;
  }
  return {};
}

}  // namespace lathe::ui
