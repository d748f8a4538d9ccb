// The wizard's finished quantizations, remembered so that later plans of the same model can show
// what was measured of them: the source model, the scheme (and bits for rtn), the output, and the
// quality report the job measured. Kept in QSettings ("quantizeOutputs", newest first, at most
// kMaxQuantOutputs); reading and writing are cheap and thread-safe (a QSettings per call).
#pragma once

#include <QString>
#include <QVector>

#include "ui/bridge/quantize_types.h"

namespace lathe::ui {

struct QuantOutputRecord {
  QString model;   // the source model's path
  QString scheme;  // QuantizeSpec::scheme
  int bits = -1;   // rtn: 4 or 8
  QString output;  // the file or folder written
  QualityReport quality;

  bool operator==(const QuantOutputRecord& other) const = default;
};

inline constexpr int kMaxQuantOutputs = 64;

// Adds `r` in front (an older record of the same output is dropped).
void recordQuantOutput(const QuantOutputRecord& r);
QVector<QuantOutputRecord> quantOutputs();

}  // namespace lathe::ui
