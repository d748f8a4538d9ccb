// The Serve panel's live request log: one row per finished API request (time, id, endpoint,
// prompt / cached / generated tokens, TTFT, tokens/s, finish reason, HTTP status). Keeps the newest
// `capacity` rows; older ones drop off the top.
#pragma once

#include <QAbstractTableModel>
#include <QVector>

#include "ui/bridge/bridge_types.h"

namespace lathe::ui {

class RequestLogModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column {
    kTime,
    kId,
    kEndpoint,
    kPromptTokens,
    kCachedTokens,
    kCompletionTokens,
    kTtft,
    kTokensPerSecond,
    kFinishReason,
    kStatus,
    kColumnCount
  };

  explicit RequestLogModel(int capacity = 10000, QObject* parent = nullptr);

  void append(const RequestLogEntry& entry);
  void clear();
  const RequestLogEntry& entry(int row) const { return m_rows.at(row); }

  int rowCount(const QModelIndex& parent = QModelIndex()) const override;
  int columnCount(const QModelIndex& parent = QModelIndex()) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

 private:
  int m_capacity;
  QVector<RequestLogEntry> m_rows;  // oldest first
};

}  // namespace lathe::ui
