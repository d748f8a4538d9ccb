#include "ui/settings/load_settings.h"

#include <QStringList>

namespace lathe::ui {

QVariantMap LoadSettings::toVariantMap() const {
  return {
      {QStringLiteral("device"), device},
      {QStringLiteral("dtype"), dtype},
      {QStringLiteral("gpuMemoryUtilization"), gpuMemoryUtilization},
      {QStringLiteral("maxModelLen"), maxModelLen},
      {QStringLiteral("maxNumSeqs"), maxNumSeqs},
      {QStringLiteral("maxNumBatchedTokens"), maxNumBatchedTokens},
      {QStringLiteral("enablePrefixCaching"), enablePrefixCaching},
      {QStringLiteral("scheduling"), scheduling},
  };
}

namespace {

QString pick(const QVariantMap& map, const char* key, const QStringList& allowed,
             const QString& fallback) {
  const QString v = map.value(QLatin1String(key)).toString();
  return allowed.contains(v) ? v : fallback;
}

int nonNegativeInt(const QVariantMap& map, const char* key) {
  bool ok = false;
  const int v = map.value(QLatin1String(key)).toInt(&ok);
  return ok && v >= 0 ? v : 0;
}

}  // namespace

LoadSettings LoadSettings::fromVariantMap(const QVariantMap& map) {
  LoadSettings s;
  s.device = pick(map, "device", {"auto", "cpu", "cuda"}, s.device);
  s.dtype = pick(map, "dtype", {"auto", "bf16", "f16"}, s.dtype);
  bool ok = false;
  const double util = map.value(QStringLiteral("gpuMemoryUtilization")).toDouble(&ok);
  if (ok && util > 0.0 && util <= 1.0) s.gpuMemoryUtilization = util;
  s.maxModelLen = nonNegativeInt(map, "maxModelLen");
  s.maxNumSeqs = nonNegativeInt(map, "maxNumSeqs");
  s.maxNumBatchedTokens = nonNegativeInt(map, "maxNumBatchedTokens");
  if (map.contains(QStringLiteral("enablePrefixCaching")))
    s.enablePrefixCaching = map.value(QStringLiteral("enablePrefixCaching")).toBool();
  s.scheduling = pick(map, "scheduling", {"continuous", "static"}, s.scheduling);
  return s;
}

}  // namespace lathe::ui
