#include "ui/models/model_card.h"

#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLocale>
#include <QVBoxLayout>

namespace lathe::ui {

QString formatBytes(qint64 bytes) {
  if (bytes < 0) return QStringLiteral("—");
  const double b = static_cast<double>(bytes);
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  double v = b;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  return u == 0
             ? QStringLiteral("%1 B").arg(bytes)
             : QStringLiteral("%1 %2").arg(QLocale().toString(v, 'f', 2), QLatin1String(units[u]));
}

QString formatCount(qint64 count) {
  const double c = static_cast<double>(count);
  if (c >= 1e9) return QStringLiteral("%1 B").arg(QLocale().toString(c / 1e9, 'f', 2));
  if (c >= 1e6) return QStringLiteral("%1 M").arg(QLocale().toString(c / 1e6, 'f', 1));
  if (c >= 1e3) return QStringLiteral("%1 K").arg(QLocale().toString(c / 1e3, 'f', 1));
  return QString::number(count);
}

ModelCard::ModelCard(QWidget* parent) : QWidget(parent) {
  auto* root = new QVBoxLayout(this);
  root->setContentsMargins(0, 0, 0, 0);
  m_title = new QLabel;
  m_title->setObjectName(QStringLiteral("cardTitle"));
  QFont big = m_title->font();
  big.setPointSizeF(big.pointSizeF() * 1.4);
  big.setBold(true);
  m_title->setFont(big);
  m_title->setWordWrap(true);
  m_path = new QLabel;
  m_path->setObjectName(QStringLiteral("cardPath"));
  m_path->setWordWrap(true);
  m_path->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_path->setForegroundRole(QPalette::PlaceholderText);
  root->addWidget(m_title);
  root->addWidget(m_path);

  m_body = new QWidget;
  auto* columns = new QHBoxLayout(m_body);
  columns->setContentsMargins(0, 0, 0, 0);
  auto* modelBox = new QGroupBox(tr("Model"));
  auto* modelForm = new QFormLayout(modelBox);
  addField(modelForm, QStringLiteral("name"), tr("Name:"));
  addField(modelForm, QStringLiteral("architecture"), tr("Architecture:"));
  addField(modelForm, QStringLiteral("format"), tr("Format:"));
  addField(modelForm, QStringLiteral("parameters"), tr("Parameters:"));
  addField(modelForm, QStringLiteral("layers"), tr("Layers:"));
  addField(modelForm, QStringLiteral("heads"), tr("Attention heads:"));
  addField(modelForm, QStringLiteral("kvHeads"), tr("KV heads:"));
  addField(modelForm, QStringLiteral("headDim"), tr("Head dimension:"));
  addField(modelForm, QStringLiteral("hiddenSize"), tr("Hidden size:"));
  addField(modelForm, QStringLiteral("context"), tr("Context length:"));
  addField(modelForm, QStringLiteral("dtype"), tr("Weights stored as:"));
  addField(modelForm, QStringLiteral("fileSize"), tr("File size:"));
  addField(modelForm, QStringLiteral("chatTemplate"), tr("Chat template:"));
  columns->addWidget(modelBox, 1);

  auto* planBox = new QGroupBox(tr("Memory plan"));
  auto* planLayout = new QVBoxLayout(planBox);
  auto* planForm = new QFormLayout;
  addField(planForm, QStringLiteral("weightsFp16"), tr("Weights at FP16:"));
  addField(planForm, QStringLiteral("weightsInt8"), tr("Weights at INT8:"));
  addField(planForm, QStringLiteral("weightsInt4"), tr("Weights at INT4:"));
  addField(planForm, QStringLiteral("weightsLoaded"), tr("Weights as loaded:"));
  addField(planForm, QStringLiteral("kvPerToken"), tr("KV cache per token:"));
  addField(planForm, QStringLiteral("kvPlan"), tr("KV for the settings:"));
  addField(planForm, QStringLiteral("budget"), tr("Available on device:"));
  addField(planForm, QStringLiteral("kvAlloc"), tr("KV cache at load:"));
  planLayout->addLayout(planForm);
  m_verdict = new QLabel;
  m_verdict->setObjectName(QStringLiteral("verdict"));
  m_verdict->setWordWrap(true);
  m_verdict->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_advice = new QLabel;
  m_advice->setObjectName(QStringLiteral("advice"));
  m_advice->setWordWrap(true);
  planLayout->addWidget(m_verdict);
  planLayout->addWidget(m_advice);
  planLayout->addStretch(1);
  m_fields.insert(QStringLiteral("verdict"), m_verdict);
  columns->addWidget(planBox, 1);
  root->addWidget(m_body);
  clear();
}

QLabel* ModelCard::addField(QFormLayout* form, const QString& key, const QString& label) {
  auto* value = new QLabel;
  value->setObjectName(QStringLiteral("field_") + key);
  value->setTextInteractionFlags(Qt::TextSelectableByMouse);
  value->setWordWrap(true);
  form->addRow(label, value);
  m_fields.insert(key, value);
  return value;
}

void ModelCard::setField(const QString& key, const QString& text, const QVariant& raw) {
  QLabel* label = m_fields.value(key);
  if (label == nullptr) return;
  label->setText(text);
  label->setProperty("rawValue", raw);
}

void ModelCard::clear() {
  m_title->setText(tr("No model"));
  m_path->setText(
      tr("Drop a .gguf file or a Hugging Face model folder on the window, or use "
         "File ▸ Open."));
  for (auto it = m_fields.begin(); it != m_fields.end(); ++it) {
    it.value()->clear();
    it.value()->setProperty("rawValue", QVariant());
  }
  m_advice->clear();
  m_body->setEnabled(false);
}

void ModelCard::setPending(const QString& path) {
  clear();
  m_title->setText(tr("Reading %1…").arg(QFileInfo(path).fileName()));
  m_path->setText(path);
}

void ModelCard::setModel(const ModelSummary& m) {
  const QLocale loc;
  m_body->setEnabled(true);
  m_title->setText(QFileInfo(m.path).fileName());
  setField(QStringLiteral("name"), m.name, m.name);
  m_path->setText(m.path);
  setField(QStringLiteral("architecture"), m.architecture, m.architecture);
  setField(QStringLiteral("format"), m.format, m.format);
  setField(
      QStringLiteral("parameters"),
      QStringLiteral("%1 (%2)").arg(formatCount(m.numParameters), loc.toString(m.numParameters)),
      m.numParameters);
  setField(QStringLiteral("layers"), loc.toString(m.numLayers), m.numLayers);
  setField(QStringLiteral("heads"), loc.toString(m.numHeads), m.numHeads);
  setField(QStringLiteral("kvHeads"),
           m.numKvHeads == m.numHeads ? tr("%1 (multi-head)").arg(loc.toString(m.numKvHeads))
                                      : tr("%1 (grouped-query, %2 queries per KV head)")
                                            .arg(loc.toString(m.numKvHeads))
                                            .arg(m.numKvHeads > 0 ? m.numHeads / m.numKvHeads : 0),
           m.numKvHeads);
  setField(QStringLiteral("headDim"), loc.toString(m.headDim), m.headDim);
  setField(QStringLiteral("hiddenSize"), loc.toString(m.hiddenSize), m.hiddenSize);
  setField(QStringLiteral("context"), tr("%1 tokens").arg(loc.toString(m.contextLength)),
           m.contextLength);
  QStringList groups;
  for (const auto& [group, type] : m.dtypeSummary)
    groups << QStringLiteral("%1: %2").arg(group, type);
  setField(QStringLiteral("dtype"), m.dtype, m.dtype);
  m_fields.value(QStringLiteral("dtype"))->setToolTip(groups.join(QLatin1Char('\n')));
  setField(QStringLiteral("fileSize"),
           QStringLiteral("%1 (%2 bytes)").arg(formatBytes(m.fileBytes), loc.toString(m.fileBytes)),
           m.fileBytes);
  setField(QStringLiteral("chatTemplate"),
           m.hasChatTemplate ? tr("included") : tr("none (chat uses plain prompts)"),
           m.hasChatTemplate);
}

void ModelCard::setPlan(const MemoryPlan& p) {
  const QLocale loc;
  setField(QStringLiteral("weightsFp16"), formatBytes(p.weightsFp16Bytes), p.weightsFp16Bytes);
  setField(QStringLiteral("weightsInt8"), formatBytes(p.weightsInt8Bytes), p.weightsInt8Bytes);
  setField(QStringLiteral("weightsInt4"), formatBytes(p.weightsInt4Bytes), p.weightsInt4Bytes);
  setField(QStringLiteral("weightsLoaded"), formatBytes(p.weightsAsLoadedBytes),
           p.weightsAsLoadedBytes);
  setField(QStringLiteral("kvPerToken"),
           tr("%1 (%2 bytes)").arg(formatBytes(p.kvBytesPerToken), loc.toString(p.kvBytesPerToken)),
           p.kvBytesPerToken);
  setField(
      QStringLiteral("kvPlan"),
      tr("%1 for %2 tokens × %3 sequences")
          .arg(formatBytes(p.kvBytesForPlan), loc.toString(p.maxModelLen), loc.toString(p.numSeqs)),
      p.kvBytesForPlan);
  setField(QStringLiteral("budget"),
           tr("%1 (%2)").arg(formatBytes(p.budgetBytes),
                             p.deviceIsGpu ? p.deviceName : tr("RAM, %1").arg(p.deviceName)),
           p.budgetBytes);
  setField(QStringLiteral("kvAlloc"),
           p.kvAllocTokens > 0
               ? tr("%1 = %2 tokens (%3 sequences of %4)")
                     .arg(formatBytes(p.kvAllocBytes), loc.toString(p.kvAllocTokens),
                          loc.toString(p.maxModelLen > 0 ? p.kvAllocTokens / p.maxModelLen : 0),
                          loc.toString(p.maxModelLen))
               : tr("none: the weights leave no room"),
           p.kvAllocBytes);
  m_fields.value(QStringLiteral("kvAlloc"))
      ->setToolTip(p.deviceIsGpu
                       ? tr("What the engine gives the KV cache: the GPU budget minus weights and "
                            "runtime overhead.")
                       : tr("The CPU backend's default KV budget (min(1 GiB, 25% of RAM)); "
                            "sequences beyond it wait or are preempted."));
  const QString color = p.verdict == MemoryPlan::Verdict::kFits ? QStringLiteral("#16a34a")
                        : p.verdict == MemoryPlan::Verdict::kFitsFewerSeqs
                            ? QStringLiteral("#d97706")
                            : QStringLiteral("#dc2626");
  const QString mark = p.verdict == MemoryPlan::Verdict::kFits            ? QStringLiteral("✔")
                       : p.verdict == MemoryPlan::Verdict::kFitsFewerSeqs ? QStringLiteral("◐")
                                                                          : QStringLiteral("✘");
  m_verdict->setText(QStringLiteral("<span style=\"color:%1; font-weight:600\">%2 %3</span>")
                         .arg(color, mark, p.verdictText.toHtmlEscaped()));
  m_verdict->setProperty("rawValue", static_cast<int>(p.verdict));
  m_advice->setText(p.advice);
}

QString ModelCard::verdictText() const {
  return m_verdict->text();
}

}  // namespace lathe::ui
