#include "ui/quantize/finished_page.h"

#include <QDesktopServices>
#include <QFileInfo>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QUrl>
#include <QVBoxLayout>

#include "ui/models/model_card.h"
#include "ui/quantize/run_page.h"

namespace lathe::ui {

FinishedPage::FinishedPage(QWidget* parent) : QWizardPage(parent) {
  setTitle(tr("Done"));
  setSubTitle(tr("The quantized model is complete under its name; nothing else was written."));
  setFinalPage(true);
  auto* layout = new QVBoxLayout(this);
  m_summary = new QLabel;
  m_summary->setObjectName(QStringLiteral("finishedSummary"));
  m_summary->setWordWrap(true);
  m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(m_summary);
  auto* card = new QGroupBox(tr("Quality report"));
  auto* cardLayout = new QVBoxLayout(card);
  m_quality = new QLabel;
  m_quality->setObjectName(QStringLiteral("qualityCard"));
  m_quality->setWordWrap(true);
  cardLayout->addWidget(m_quality);
  layout->addWidget(card);
  auto* row = new QHBoxLayout;
  m_load = new QPushButton(QIcon(QStringLiteral(":/icons/load.svg")), tr("Load"));
  m_load->setObjectName(QStringLiteral("finishedLoad"));
  m_load->setToolTip(tr("Open the quantized model on the Models page and load it."));
  m_compare = new QPushButton(tr("Compare with original"));
  m_compare->setObjectName(QStringLiteral("finishedCompare"));
  m_compare->setToolTip(
      tr("Measure both on the Compare page: latency, prefill and a serving "
         "sweep."));
  m_show = new QPushButton(QIcon(QStringLiteral(":/icons/open.svg")), tr("Show in folder"));
  m_show->setObjectName(QStringLiteral("finishedShow"));
  row->addWidget(m_load);
  row->addWidget(m_compare);
  row->addWidget(m_show);
  row->addStretch(1);
  layout->addLayout(row);
  layout->addStretch(1);
  connect(m_load, &QPushButton::clicked, this, [this] { emit loadRequested(m_spec.output); });
  connect(m_compare, &QPushButton::clicked, this,
          [this] { emit compareRequested(m_spec.model, m_spec.output); });
  connect(m_show, &QPushButton::clicked, this, [this] {
    QDesktopServices::openUrl(QUrl::fromLocalFile(QFileInfo(m_spec.output).absolutePath()));
  });
}

void FinishedPage::setResult(const QuantizeSpec& spec, const QuantizeOutcome& o,
                             const QuantCandidate& c) {
  m_spec = spec;
  QString text =
      tr("<b>%1</b><br>%2 in %3: %4 tensors quantized, %5 kept.")
          .arg(o.output.toHtmlEscaped(), formatBytes(o.outputBytes), formatDuration(o.seconds))
          .arg(o.quantizedTensors)
          .arg(o.keptTensors);
  for (const QString& note : o.notes) text += QStringLiteral("<br>• ") + note.toHtmlEscaped();
  m_summary->setText(text);
  // Measured by lathe eval when the output page asked for it; else the expected figure.
  const QualityReport& r = o.quality;
  m_quality->setProperty("perplexity", r.perplexity);
  m_quality->setProperty("referencePerplexity", r.referencePerplexity);
  m_quality->setProperty("kldMean", r.kldMean);
  m_quality->setProperty("top1Agreement", r.top1Agreement);
  m_quality->setProperty("measured", r.measured);
  const QString expected =
      c.quality.isEmpty() ? tr("no published figure for %1").arg(c.label)
                          : tr("%1 (literature: %2)")
                                .arg(c.quality.toHtmlEscaped(), c.qualityCitation.toHtmlEscaped());
  if (r.measured) {
    m_quality->setText(
        tr("Measured by lathe eval against the original on <b>%1</b> (%2 windows of %3 tokens, "
           "%4 positions, %5):<br>perplexity <b>%6</b> (original %7, %8%9)<br>mean KL divergence "
           "<b>%10</b> nats (p99 %11)<br>top-1 agreement <b>%12 %</b><br>Expected: %13.")
            .arg(QFileInfo(r.text).fileName().toHtmlEscaped())
            .arg(r.windows)
            .arg(r.context)
            .arg(r.scoredPositions)
            .arg(formatDuration(r.seconds))
            .arg(r.perplexity, 0, 'f', 4)
            .arg(r.referencePerplexity, 0, 'f', 4)
            .arg(r.perplexity >= r.referencePerplexity ? QStringLiteral("+") : QString())
            .arg(r.perplexity - r.referencePerplexity, 0, 'f', 4)
            .arg(r.kldMean, 0, 'f', 5)
            .arg(r.kldP99, 0, 'f', 4)
            .arg(100.0 * r.top1Agreement, 0, 'f', 2)
            .arg(expected));
  } else {
    m_quality->setText(
        tr("Not measured%1.<br>Expected: %2.")
            .arg(r.error.isEmpty() ? QString() : QStringLiteral(": ") + r.error.toHtmlEscaped(),
                 expected));
  }
}

QString FinishedPage::summaryText() const {
  return m_summary->text();
}

}  // namespace lathe::ui
