// Which candidate the wizard recommends for a goal, with one line of why. Pure: tested without a
// model or a window.
#pragma once

#include <QString>
#include <QVector>

#include "ui/bridge/quantize_types.h"

namespace lathe::ui {

enum class QuantGoal {
  kFitBudget,    // the best expected quality whose weights + KV cache fit in budgetBytes
  kFastest,      // the highest batch-1 roofline ceiling that fits the device
  kBestQuality,  // the best expected quality that fits the device with the current KV settings
  kSpecific,     // the user's own pick: no recommendation
};

struct Recommendation {
  int index = -1;  // into the candidates; -1: none fits
  QString why;     // one line; says what to change when nothing fits
};

Recommendation recommendCandidate(const QVector<QuantCandidate>& candidates, QuantGoal goal,
                                  qint64 budgetBytes = 0);

}  // namespace lathe::ui
