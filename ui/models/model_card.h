// The model card: what a model is (architecture, parameters, layers / heads / KV heads / head dim,
// context length, dtype or quantization, file size) and its memory plan (weights at FP16 / INT8 /
// INT4, KV cache per token and for max-model-len × sequences) with a verdict against the detected
// GPU or RAM. Every number label carries its exact value in the "rawValue" property.
#pragma once

#include <QHash>
#include <QWidget>

#include "ui/bridge/bridge_types.h"

class QFormLayout;
class QLabel;

namespace lathe::ui {

class ModelCard : public QWidget {
  Q_OBJECT
 public:
  explicit ModelCard(QWidget* parent = nullptr);

  void setModel(const ModelSummary& model);
  void setPlan(const MemoryPlan& plan);
  void setPending(const QString& path);  // "Reading <file>…"
  void clear();

  // The label of a field ("name", "parameters", "layers", "heads", "kvHeads", "headDim", "context",
  // "dtype", "fileSize", "architecture", "name", "format", "weightsFp16", "weightsInt8",
  // "weightsInt4", "weightsLoaded", "kvPerToken", "kvPlan", "budget", "kvAlloc", "verdict"),
  // or null.
  QLabel* field(const QString& key) const { return m_fields.value(key); }
  QString verdictText() const;

 private:
  QLabel* addField(QFormLayout* form, const QString& key, const QString& label);
  void setField(const QString& key, const QString& text, const QVariant& raw = QVariant());

  QLabel* m_title = nullptr;
  QLabel* m_path = nullptr;
  QLabel* m_verdict = nullptr;
  QLabel* m_advice = nullptr;
  QWidget* m_body = nullptr;
  QHash<QString, QLabel*> m_fields;
};

// "1.50 GiB"; "—" for negative values.
QString formatBytes(qint64 bytes);
// "134.5 M", "8.03 B"
QString formatCount(qint64 count);

}  // namespace lathe::ui
