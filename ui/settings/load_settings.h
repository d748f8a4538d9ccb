// Load settings as the user edits them in Lathe Studio (Models ▸ Load settings, presets). Plain
// Qt-side data: the EngineBridge turns it into the engine's EngineConfig. A value of 0 means "let
// the engine decide" (the model's context length, the device's default batch sizes).
#pragma once

#include <QString>
#include <QVariantMap>

namespace lathe::ui {

struct LoadSettings {
  QString device = QStringLiteral("auto");  // auto | cpu | cuda
  QString dtype = QStringLiteral("auto");   // auto | bf16 | f16 (activations on the GPU)
  double gpuMemoryUtilization = 0.90;       // share of GPU memory Lathe may use, (0, 1]
  int maxModelLen = 0;          // tokens per sequence (prompt + output); 0 = model's context
  int maxNumSeqs = 0;           // batch slots; 0 = device default (GPU 256, CPU 64)
  int maxNumBatchedTokens = 0;  // tokens per step; 0 = device default (GPU 8192, CPU 512)
  bool enablePrefixCaching = true;
  QString scheduling = QStringLiteral("continuous");  // continuous | static

  // Round trip through QSettings / presets. Unknown or invalid values fall back to the defaults.
  QVariantMap toVariantMap() const;
  static LoadSettings fromVariantMap(const QVariantMap& map);

  bool operator==(const LoadSettings& other) const = default;
};

}  // namespace lathe::ui
