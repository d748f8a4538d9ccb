#include "ui/serve/request_log_model.h"

#include <QDateTime>
#include <QLocale>

namespace lathe::ui {

RequestLogModel::RequestLogModel(int capacity, QObject* parent)
    : QAbstractTableModel(parent), m_capacity(qMax(1, capacity)) {}

void RequestLogModel::append(const RequestLogEntry& entry) {
  if (m_rows.size() >= m_capacity) {
    beginRemoveRows({}, 0, 0);
    m_rows.removeFirst();
    endRemoveRows();
  }
  const int row = static_cast<int>(m_rows.size());
  beginInsertRows({}, row, row);
  m_rows.push_back(entry);
  endInsertRows();
}

void RequestLogModel::clear() {
  beginResetModel();
  m_rows.clear();
  endResetModel();
}

int RequestLogModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_rows.size());
}

int RequestLogModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : kColumnCount;
}

QVariant RequestLogModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= m_rows.size()) return {};
  const RequestLogEntry& e = m_rows[index.row()];
  if (role == Qt::TextAlignmentRole) {
    const bool numeric = index.column() == kPromptTokens || index.column() == kCachedTokens ||
                         index.column() == kCompletionTokens || index.column() == kTtft ||
                         index.column() == kTokensPerSecond || index.column() == kStatus;
    return QVariant::fromValue(Qt::Alignment(numeric ? Qt::AlignRight | Qt::AlignVCenter
                                                     : Qt::AlignLeft | Qt::AlignVCenter));
  }
  if (role == Qt::UserRole) {  // raw values for sorting
    switch (index.column()) {
      case kTime:
        return e.timeMsecsSinceEpoch;
      case kPromptTokens:
        return e.promptTokens;
      case kCachedTokens:
        return e.cachedPromptTokens;
      case kCompletionTokens:
        return e.completionTokens;
      case kTtft:
        return e.ttftMs;
      case kTokensPerSecond:
        return e.tokensPerSecond;
      case kStatus:
        return e.httpStatus;
      default:
        break;
    }
  }
  if (role != Qt::DisplayRole && role != Qt::UserRole) return {};
  const QLocale locale;
  switch (index.column()) {
    case kTime:
      return QDateTime::fromMSecsSinceEpoch(e.timeMsecsSinceEpoch)
          .toString(QStringLiteral("HH:mm:ss.zzz"));
    case kId:
      return e.id;
    case kEndpoint:
      return e.endpoint;
    case kPromptTokens:
      return e.promptTokens;
    case kCachedTokens:
      return e.cachedPromptTokens;
    case kCompletionTokens:
      return e.completionTokens;
    case kTtft:
      return e.ttftMs < 0 ? QStringLiteral("—") : locale.toString(e.ttftMs, 'f', 1);
    case kTokensPerSecond:
      return locale.toString(e.tokensPerSecond, 'f', 1);
    case kFinishReason:
      return e.finishReason;
    case kStatus:
      return e.httpStatus;
    default:
      return {};
  }
}

QVariant RequestLogModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case kTime:
      return tr("Time");
    case kId:
      return tr("Request");
    case kEndpoint:
      return tr("Endpoint");
    case kPromptTokens:
      return tr("Prompt tok");
    case kCachedTokens:
      return tr("Cached tok");
    case kCompletionTokens:
      return tr("Generated tok");
    case kTtft:
      return tr("TTFT (ms)");
    case kTokensPerSecond:
      return tr("Tokens/s");
    case kFinishReason:
      return tr("Finish");
    case kStatus:
      return tr("HTTP");
    default:
      return {};
  }
}

}  // namespace lathe::ui
