// The Compare tab's results: a table model with one row per measured variant (storage, size,
// bits/weight, KV cache, batch-1 decode tokens/s and latency, prefill tokens/s, TTFT, the best
// output throughput of the sweep and where, and the quality columns that lathe eval will fill),
// and the CSV export (one row per variant and concurrency level). JSON is the saved run's format
// (compare_run.h); Markdown is compare_report.h.
#pragma once

#include <QAbstractTableModel>
#include <QByteArray>

#include "ui/bridge/quantize_types.h"

namespace lathe::ui {

class CompareResultsModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column {
    kModel,
    kStorage,
    kSize,
    kBitsPerWeight,
    kKvCache,
    kBatch1,
    kLatency,
    kPrefill,
    kTtft,
    kPeakThroughput,
    kQuality,
    kDevice,
    kColumnCount
  };

  explicit CompareResultsModel(QObject* parent = nullptr);

  void clear();
  void setVariant(int index, const CompareVariant& variant);  // grows the table as needed
  void setVariants(const QVector<CompareVariant>& variants);  // a whole run at once (Open run)
  const QVector<CompareVariant>& variants() const { return m_variants; }

  int rowCount(const QModelIndex& parent = QModelIndex()) const override;
  int columnCount(const QModelIndex& parent = QModelIndex()) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

 private:
  QVector<CompareVariant> m_variants;
};

// CSV (RFC 4180, "." decimals): header, then one line per variant × concurrency level (a variant
// without a sweep gets one line with empty sweep columns).
QByteArray compareToCsv(const QVector<CompareVariant>& variants);

}  // namespace lathe::ui

namespace lathe::ui {
// One paragraph from the numbers: each variant's batch-1 speed and peak serving throughput as a
// multiple of the first (reference) model's, its size as a share of the first's, its quality
// against the first when measured, and which variant has the best p99 ITL at the highest level.
// Empty with fewer than two measured variants.
QString compareVerdict(const QVector<CompareVariant>& variants);
}  // namespace lathe::ui
