#include "ui/compare/compare_results.h"

#include <QFileInfo>

#include "ui/models/model_card.h"

namespace lathe::ui {

namespace {

// The sweep point with the highest output throughput, or null.
const ComparePoint* peak(const CompareVariant& v) {
  const ComparePoint* best = nullptr;
  for (const ComparePoint& p : v.sweep)
    if (best == nullptr || p.outputTokensPerSec > best->outputTokensPerSec) best = &p;
  return best;
}

QString csvField(const QString& s) {
  if (!s.contains(QLatin1Char(',')) && !s.contains(QLatin1Char('"')) &&
      !s.contains(QLatin1Char('\n')))
    return s;
  return QLatin1Char('"') + QString(s).replace(QLatin1String("\""), QLatin1String("\"\"")) +
         QLatin1Char('"');
}

QString num(double v, int decimals = 3) {
  return QString::number(v, 'f', decimals);
}

}  // namespace

CompareResultsModel::CompareResultsModel(QObject* parent) : QAbstractTableModel(parent) {}

void CompareResultsModel::clear() {
  beginResetModel();
  m_variants.clear();
  endResetModel();
}

void CompareResultsModel::setVariants(const QVector<CompareVariant>& variants) {
  beginResetModel();
  m_variants = variants;
  endResetModel();
}

void CompareResultsModel::setVariant(int index, const CompareVariant& variant) {
  if (index < 0) return;
  if (index >= m_variants.size()) {
    beginInsertRows(QModelIndex(), static_cast<int>(m_variants.size()), index);
    m_variants.resize(index + 1);
    m_variants[index] = variant;
    endInsertRows();
    return;
  }
  m_variants[index] = variant;
  emit dataChanged(this->index(index, 0), this->index(index, kColumnCount - 1));
}

int CompareResultsModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_variants.size());
}

int CompareResultsModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : kColumnCount;
}

QVariant CompareResultsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal) return {};
  static const char* const kNames[kColumnCount] = {"Model",
                                                   "Storage",
                                                   "Size",
                                                   "Bits/weight",
                                                   "KV cache",
                                                   "Batch-1 tok/s",
                                                   "Latency",
                                                   "Prefill tok/s",
                                                   "TTFT (batch 1)",
                                                   "Peak output tok/s",
                                                   "Quality vs first",
                                                   "Device"};
  static const char* const kTips[kColumnCount] = {
      "The model file or folder.",
      "How its weights are stored.",
      "Weight files on disk.",
      "Weight bytes × 8 / parameters.",
      "KV cache the engine allocated.",
      "Decode speed of one request: 1 / mean time per output token.",
      "Mean end-to-end time of one request (prompt + output lengths of the run).",
      "Prompt tokens / median time to first token, one request at a time.",
      "Median time to first token of one request.",
      "Highest output throughput of the serving sweep, and at which concurrency.",
      "Mean KL divergence from the first model and top-1 agreement with it on held-out text "
      "(lathe eval; perplexities in the tooltip).",
      "Where it was measured: the engine's device."};
  if (section < 0 || section >= kColumnCount) return {};
  if (role == Qt::DisplayRole) return tr(kNames[section]);
  if (role == Qt::ToolTipRole) return tr(kTips[section]);
  return {};
}

QVariant CompareResultsModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid()) return {};
  const CompareVariant& v = m_variants[index.row()];
  if (role == Qt::ToolTipRole && index.column() == kQuality && v.quality.measured)
    return tr("PPL %1 (first model %2), KLD p99 %3, %4 positions of %5")
        .arg(num(v.quality.perplexity, 3), num(v.quality.referencePerplexity, 3),
             num(v.quality.kldP99, 4))
        .arg(v.quality.scoredPositions)
        .arg(QFileInfo(v.quality.text).fileName());
  if (role == Qt::ToolTipRole) return v.error.isEmpty() ? v.path : v.error;
  if (role != Qt::DisplayRole && role != Qt::UserRole) return {};
  const bool raw = role == Qt::UserRole;
  const ComparePoint* best = peak(v);
  switch (index.column()) {
    case kModel:
      return v.error.isEmpty() ? v.name : tr("%1 (⚠ %2)").arg(v.name, v.error);
    case kStorage:
      return v.dtype;
    case kSize:
      return raw ? QVariant(v.weightBytes) : QVariant(formatBytes(v.weightBytes));
    case kBitsPerWeight:
      return raw ? QVariant(v.bitsPerWeight) : QVariant(num(v.bitsPerWeight, 2));
    case kKvCache:
      return raw ? QVariant(v.kvCacheBytes) : QVariant(formatBytes(v.kvCacheBytes));
    case kBatch1:
      return raw ? QVariant(v.batch1TokensPerSec) : QVariant(num(v.batch1TokensPerSec, 1));
    case kLatency:
      return raw ? QVariant(v.batch1LatencyMs)
                 : QVariant(tr("%1 ms").arg(num(v.batch1LatencyMs, 0)));
    case kPrefill:
      return raw ? QVariant(v.prefillTokensPerSec) : QVariant(num(v.prefillTokensPerSec, 0));
    case kTtft:
      return raw ? QVariant(v.ttftMs) : QVariant(tr("%1 ms").arg(num(v.ttftMs, 1)));
    case kPeakThroughput:
      if (best == nullptr) return raw ? QVariant(0.0) : QVariant(QStringLiteral("—"));
      return raw ? QVariant(best->outputTokensPerSec)
                 : QVariant(
                       tr("%1 @ %2").arg(num(best->outputTokensPerSec, 1)).arg(best->concurrency));
    case kQuality:
      if (raw) return v.quality.measured ? QVariant(v.quality.kldMean) : QVariant();
      if (index.row() == 0) return tr("reference");
      if (v.quality.measured)
        return tr("KLD %1, top-1 %2%")
            .arg(num(v.quality.kldMean, 4), num(100.0 * v.quality.top1Agreement, 1));
      return v.quality.error.isEmpty() ? tr("—") : tr("— (%1)").arg(v.quality.error);
    case kDevice:
      return v.device;
  }
  return {};
}

QByteArray compareToCsv(const QVector<CompareVariant>& variants) {
  QStringList lines;
  lines << QStringLiteral(
      "model,path,storage,weight_bytes,bits_per_weight,kv_cache_bytes,batch1_tokens_per_s,"
      "batch1_latency_ms,prefill_tokens_per_s,ttft_ms,concurrency,completed,failed,"
      "output_tokens_per_s,requests_per_s,ttft_p50_ms,ttft_p99_ms,itl_p50_ms,itl_p99_ms,"
      "kld_mean,top1_agreement,perplexity,error");
  for (const CompareVariant& v : variants) {
    const QString head = QStringList{csvField(v.name),           csvField(v.path),
                                     csvField(v.dtype),          QString::number(v.weightBytes),
                                     num(v.bitsPerWeight, 4),    QString::number(v.kvCacheBytes),
                                     num(v.batch1TokensPerSec),  num(v.batch1LatencyMs),
                                     num(v.prefillTokensPerSec), num(v.ttftMs)}
                             .join(QLatin1Char(','));
    const QString quality =
        v.quality.measured ? QStringList{num(v.quality.kldMean, 6), num(v.quality.top1Agreement, 6),
                                         num(v.quality.perplexity, 4)}
                                 .join(QLatin1Char(','))
                           : QStringLiteral(",,");
    if (v.sweep.isEmpty())
      lines << head + QStringLiteral(",,,,,,,,,,") + quality + QLatin1Char(',') + csvField(v.error);
    for (const ComparePoint& p : v.sweep)
      lines << head + QLatin1Char(',') +
                   QStringList{QString::number(p.concurrency),
                               QString::number(p.completed),
                               QString::number(p.failed),
                               num(p.outputTokensPerSec),
                               num(p.requestsPerSec),
                               num(p.ttftP50Ms),
                               num(p.ttftP99Ms),
                               num(p.itlP50Ms),
                               num(p.itlP99Ms),
                               quality,
                               csvField(v.error)}
                       .join(QLatin1Char(','));
  }
  return (lines.join(QLatin1Char('\n')) + QLatin1Char('\n')).toUtf8();
}

}  // namespace lathe::ui

namespace lathe::ui {

QString compareVerdict(const QVector<CompareVariant>& vs) {
  if (vs.size() < 2 || !vs[0].error.isEmpty()) return {};
  const CompareVariant& ref = vs[0];
  const ComparePoint* refPeak = peak(ref);
  QStringList parts;
  for (int i = 1; i < vs.size(); ++i) {
    const CompareVariant& v = vs[i];
    if (!v.error.isEmpty()) {
      parts << QObject::tr("%1: not measured (%2)").arg(v.name, v.error);
      continue;
    }
    QString s =
        QObject::tr("%1: %2× the batch-1 speed of %3")
            .arg(v.name)
            .arg(ref.batch1TokensPerSec > 0 ? v.batch1TokensPerSec / ref.batch1TokensPerSec : 0.0,
                 0, 'f', 2)
            .arg(ref.name);
    const ComparePoint* p = peak(v);
    if (p != nullptr && refPeak != nullptr && refPeak->outputTokensPerSec > 0)
      s += QObject::tr(", %1× its peak serving throughput (%2 vs %3 tokens/s)")
               .arg(p->outputTokensPerSec / refPeak->outputTokensPerSec, 0, 'f', 2)
               .arg(p->outputTokensPerSec, 0, 'f', 1)
               .arg(refPeak->outputTokensPerSec, 0, 'f', 1);
    s += QObject::tr(", %1 of its size")
             .arg(ref.weightBytes > 0 ? QStringLiteral("%1%").arg(
                                            100.0 * v.weightBytes / ref.weightBytes, 0, 'f', 0)
                                      : QStringLiteral("—"));
    if (v.quality.measured)
      s += QObject::tr(", mean KLD %1 and top-1 agreement %2% against it")
               .arg(v.quality.kldMean, 0, 'f', 4)
               .arg(100.0 * v.quality.top1Agreement, 0, 'f', 1);
    parts << s;
  }
  // The best tail latency at the highest level every variant reached.
  const CompareVariant* bestItl = nullptr;
  int level = 0;
  for (const CompareVariant& v : vs)
    if (!v.sweep.isEmpty() &&
        (bestItl == nullptr || v.sweep.last().itlP99Ms < bestItl->sweep.last().itlP99Ms)) {
      bestItl = &v;
      level = v.sweep.last().concurrency;
    }
  QString text = parts.join(QStringLiteral("; ")) + QLatin1Char('.');
  if (bestItl != nullptr)
    text += QObject::tr(" Best p99 ITL at concurrency %1: %2 (%3 ms).")
                .arg(level)
                .arg(bestItl->name)
                .arg(bestItl->sweep.last().itlP99Ms, 0, 'f', 1);
  return text;
}

}  // namespace lathe::ui
