#include "ui/quantize/recommendation.h"

#include <QObject>

#include "ui/models/model_card.h"

namespace lathe::ui {

namespace {

bool fitsDevice(const QuantCandidate& c) {
  return c.plan.verdict == MemoryPlan::Verdict::kFits;
}

// Weights plus the KV cache for the current max-model-len × sequences.
qint64 neededBytes(const QuantCandidate& c) {
  return c.expectedBytes + c.plan.kvBytesForPlan;
}

// Better quality first, then the smaller output.
bool betterQuality(const QuantCandidate& a, const QuantCandidate& b) {
  if (a.qualityRank != b.qualityRank) return a.qualityRank > b.qualityRank;
  return a.expectedBytes < b.expectedBytes;
}

}  // namespace

Recommendation recommendCandidate(const QVector<QuantCandidate>& cs, QuantGoal goal,
                                  qint64 budgetBytes) {
  Recommendation r;
  if (goal == QuantGoal::kSpecific) {
    r.why = QObject::tr("Pick any enabled scheme in the table.");
    return r;
  }
  for (int i = 0; i < cs.size(); ++i) {
    const QuantCandidate& c = cs[i];
    if (!c.enabled) continue;
    const bool eligible =
        goal == QuantGoal::kFitBudget ? neededBytes(c) <= budgetBytes : fitsDevice(c);
    if (!eligible) continue;
    if (r.index < 0) {
      r.index = i;
      continue;
    }
    const QuantCandidate& best = cs[r.index];
    const bool better =
        goal == QuantGoal::kFastest
            ? (c.tokensPerSecond != best.tokensPerSecond ? c.tokensPerSecond > best.tokensPerSecond
                                                         : betterQuality(c, best))
            : betterQuality(c, best);
    if (better) r.index = i;
  }
  if (r.index < 0) {
    r.why = goal == QuantGoal::kFitBudget
                ? QObject::tr(
                      "No scheme fits in %1 with the current KV settings: raise the budget "
                      "or lower max model length / sequences in the load settings.")
                      .arg(formatBytes(budgetBytes))
                : QObject::tr(
                      "No scheme fits this device with the current KV settings: lower max "
                      "model length or sequences in the load settings.");
    return r;
  }
  const QuantCandidate& c = cs[r.index];
  switch (goal) {
    case QuantGoal::kFitBudget:
      r.why = QObject::tr(
                  "%1: the best expected quality (%2) whose weights and KV cache (%3) fit "
                  "in %4.")
                  .arg(c.label, c.quality, formatBytes(neededBytes(c)), formatBytes(budgetBytes));
      break;
    case QuantGoal::kFastest:
      r.why = QObject::tr(
                  "%1: the fewest bytes read per token (%2), so the highest batch-1 "
                  "ceiling (%3 tokens/s).")
                  .arg(c.label, formatBytes(c.expectedBytes))
                  .arg(c.tokensPerSecond, 0, 'f', 0);
      break;
    case QuantGoal::kBestQuality:
      r.why = QObject::tr(
                  "%1: the best expected quality (%2) that fits this device with the "
                  "current KV settings.")
                  .arg(c.label, c.quality);
      break;
    case QuantGoal::kSpecific:
      break;
  }
  return r;
}

}  // namespace lathe::ui
