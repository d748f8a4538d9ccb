#include "ui/quantize/candidate_table_model.h"

#include <QFont>

#include "ui/models/model_card.h"

namespace lathe::ui {

CandidateTableModel::CandidateTableModel(QObject* parent) : QAbstractTableModel(parent) {}

void CandidateTableModel::setCandidates(const QVector<QuantCandidate>& candidates,
                                        const QString& deviceLabel) {
  beginResetModel();
  m_candidates = candidates;
  m_deviceLabel = deviceLabel;
  m_recommended = -1;
  endResetModel();
}

void CandidateTableModel::setRecommended(int row) {
  m_recommended = row;
  if (!m_candidates.isEmpty())
    emit dataChanged(index(0, 0), index(rowCount() - 1, kColumnCount - 1));
}

int CandidateTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_candidates.size());
}

int CandidateTableModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : kColumnCount;
}

Qt::ItemFlags CandidateTableModel::flags(const QModelIndex& index) const {
  if (!index.isValid()) return Qt::NoItemFlags;
  return m_candidates[index.row()].enabled ? Qt::ItemIsEnabled | Qt::ItemIsSelectable
                                           : Qt::NoItemFlags;
}

QVariant CandidateTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal) return {};
  if (role == Qt::DisplayRole) {
    switch (section) {
      case kScheme:
        return tr("Scheme");
      case kSize:
        return tr("Size");
      case kBitsPerWeight:
        return tr("Bits/weight");
      case kFits:
        return tr("Fits (current KV settings)");
      case kSpeed:
        return tr("Batch-1 tok/s (%1)").arg(m_deviceLabel);
      case kQuality:
        return tr("Expected quality");
    }
  }
  if (role == Qt::ToolTipRole) {
    switch (section) {
      case kSize:
        return tr(
            "The output's size as the quantization library plans it (weights and side "
            "files).");
      case kBitsPerWeight:
        return tr(
            "Output bytes × 8 / parameters: scales, zero points and unquantized tensors "
            "included.");
      case kFits:
        return tr(
            "Whether these weights plus the KV cache for max model length × sequences "
            "(Models ▸ Load settings) fit the device.");
      case kSpeed:
        return tr(
            "Roofline ceiling of single-request decoding: memory bandwidth / bytes read "
            "per token (every weight once); real speed is lower. \"measured\": the Compare "
            "tab's batch-1 figure for an earlier output of this scheme on this device.");
      case kQuality:
        return tr(
            "Perplexity increase or accuracy recovery over the original. \"literature\": a "
            "published figure for another model (hover a row for the source); "
            "\"measured\": lathe eval on this model.");
    }
  }
  return {};
}

QVariant CandidateTableModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid()) return {};
  const QuantCandidate& c = m_candidates[index.row()];
  const bool recommended = index.row() == m_recommended;
  if (role == Qt::FontRole && recommended) {
    QFont f;
    f.setBold(true);
    return f;
  }
  if (role == Qt::ToolTipRole) {
    if (!c.enabled) return c.disabledReason;
    if (index.column() == kQuality && !c.qualityCitation.isEmpty()) return c.qualityCitation;
    if (index.column() == kFits) return c.plan.verdictText;
    if (index.column() == kSpeed && c.measuredTokensPerSecond > 0.0) return c.speedSource;
    return c.description;
  }
  if (role == Qt::UserRole) {
    switch (index.column()) {
      case kScheme:
        return c.scheme;
      case kSize:
        return c.expectedBytes;
      case kBitsPerWeight:
        return c.bitsPerWeight;
      case kFits:
        return static_cast<int>(c.plan.verdict);
      case kSpeed:
        return c.tokensPerSecond;
      case kQuality:
        return c.qualityRank;
    }
  }
  if (role != Qt::DisplayRole) return {};
  const bool planned = c.enabled && c.expectedBytes > 0;
  switch (index.column()) {
    case kScheme:
      return recommended ? QStringLiteral("★ %1").arg(c.label) : c.label;
    case kSize:
      return planned ? formatBytes(c.expectedBytes) : QStringLiteral("—");
    case kBitsPerWeight:
      return planned ? QString::number(c.bitsPerWeight, 'f', 2) : QStringLiteral("—");
    case kFits:
      if (!c.enabled) return tr("unavailable");
      switch (c.plan.verdict) {
        case MemoryPlan::Verdict::kFits:
          return tr("✔ yes");
        case MemoryPlan::Verdict::kFitsFewerSeqs:
          return tr("◐ %n sequence(s)", nullptr, c.plan.seqsThatFit);
        case MemoryPlan::Verdict::kDoesNotFit:
          return tr("✘ no");
      }
      return {};
    case kSpeed:
      if (c.measuredTokensPerSecond > 0.0)
        return tr("%1 (measured)").arg(c.measuredTokensPerSecond, 0, 'f', 1);
      return planned && c.tokensPerSecond > 0 ? QString::number(c.tokensPerSecond, 'f', 0)
                                              : QStringLiteral("—");
    case kQuality:
      if (c.quality.isEmpty()) return QStringLiteral("—");
      return c.qualitySource == QualitySource::kMeasured ? tr("%1 (measured)").arg(c.quality)
                                                         : tr("%1 (literature)").arg(c.quality);
  }
  return {};
}

}  // namespace lathe::ui
