// Expected quality of a quantization scheme from published figures, until a measured report
// (`lathe eval` against the original) exists for the model. Every figure names its source; the
// table and its citations are in docs/QUANTIZATION.md ("Quality figures in the Studio").
#pragma once

#include "ui/bridge/quantize_types.h"

namespace lathe::ui {

// Fills quality, qualitySource (kLiterature), qualityCitation and qualityRank of `c` from its
// scheme and bits; leaves them empty for a scheme without a published figure.
void applyLiteratureQuality(QuantCandidate& c);

}  // namespace lathe::ui
