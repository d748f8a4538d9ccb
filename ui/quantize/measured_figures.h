// Measured figures for the wizard's candidate table (issue 16: "an expected batch-1 speed … from
// measured figures when the Compare tab has them, and its expected quality from a measured report
// when one exists"). A candidate of model M and scheme S has measured figures when the wizard once
// quantized M with S (quant_output_log.h) and:
//   - speed: a saved comparison (compare_run_store.h) measured that output's batch-1 decode on this
//     device (the variant's device name starts with the plan's device label), the newest run wins;
//   - quality: the job's own report against M, or else a saved comparison whose reference is M.
// Pure: the caller reads the records and the runs (off the GUI thread).
#pragma once

#include <QString>
#include <QVector>

#include "ui/bridge/quantize_types.h"
#include "ui/compare/compare_run.h"
#include "ui/quantize/quant_output_log.h"

namespace lathe::ui {

// runs: newest first. Sets QuantCandidate::measuredTokensPerSecond and speedSource, and quality
// (qualitySource kMeasured), where measured figures exist; leaves the others as they are.
void applyMeasuredFigures(QVector<QuantCandidate>* candidates, const QString& modelPath,
                          const QString& deviceLabel, const QVector<QuantOutputRecord>& outputs,
                          const QVector<CompareRun>& runs);

// "KLD 0.0123, top-1 97.1%"
QString measuredQualityText(const QualityReport& q);

}  // namespace lathe::ui
