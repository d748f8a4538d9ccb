// The wizard's candidate table: one row per scheme with its planned size, bits per weight, whether
// it fits with the current KV settings, the roofline's batch-1 tokens/s on this device and the
// expected quality (marked "literature" or "measured"). Disabled schemes stay as greyed rows whose
// tooltip says why. Qt::UserRole holds each cell's exact value (bytes, bits, tokens/s, verdict).
#pragma once

#include <QAbstractTableModel>

#include "ui/bridge/quantize_types.h"

namespace lathe::ui {

class CandidateTableModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { kScheme, kSize, kBitsPerWeight, kFits, kSpeed, kQuality, kColumnCount };

  explicit CandidateTableModel(QObject* parent = nullptr);

  void setCandidates(const QVector<QuantCandidate>& candidates, const QString& deviceLabel);
  void setRecommended(int row);
  const QVector<QuantCandidate>& candidates() const { return m_candidates; }
  int recommended() const { return m_recommended; }

  int rowCount(const QModelIndex& parent = QModelIndex()) const override;
  int columnCount(const QModelIndex& parent = QModelIndex()) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;
  Qt::ItemFlags flags(const QModelIndex& index) const override;

 private:
  QVector<QuantCandidate> m_candidates;
  QString m_deviceLabel;
  int m_recommended = -1;
};

}  // namespace lathe::ui
