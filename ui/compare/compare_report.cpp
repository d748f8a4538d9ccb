#include "ui/compare/compare_report.h"

#include <QFileInfo>
#include <QStringList>
#include <QUrl>

#include <cmath>

#include "ui/bridge/compare_task.h"
#include "ui/models/model_card.h"

namespace lathe::ui {

namespace {

// Backslash-escapes the characters that could end a table cell or start emphasis, a link or
// HTML; line breaks become spaces (a table row is one line).
QString md(const QString& text) {
  static const QString kSpecial = QStringLiteral("\\`*_[]<>|#");
  QString out;
  out.reserve(text.size());
  for (QChar c : text) {
    if (c == QLatin1Char('\n') || c == QLatin1Char('\r')) {
      out += QLatin1Char(' ');
      continue;
    }
    if (kSpecial.contains(c)) out += QLatin1Char('\\');
    out += c;
  }
  return out;
}

QString num(double v, int decimals) {
  return std::isfinite(v) ? QString::number(v, 'f', decimals) : QStringLiteral("—");
}

QString row(const QStringList& cells) {
  return QStringLiteral("| ") + cells.join(QStringLiteral(" | ")) + QStringLiteral(" |");
}

QString header(const QStringList& names) {
  QStringList rule;
  for (qsizetype i = 0; i < names.size(); ++i)
    rule << (i == 0 ? QStringLiteral("---") : QStringLiteral("---:"));
  return row(names) + QLatin1Char('\n') + QStringLiteral("|") + rule.join(QStringLiteral("|")) +
         QStringLiteral("|");
}

QString qualityCells(const CompareVariant& v, int index, QStringList* cells) {
  if (index == 0) {
    *cells << QObject::tr("reference") << QString() << QString()
           << num(v.quality.referencePerplexity > 0 ? v.quality.referencePerplexity : NAN, 3);
    return {};
  }
  if (!v.quality.measured) {
    *cells << QStringLiteral("—") << QStringLiteral("—") << QStringLiteral("—")
           << QStringLiteral("—");
    return v.quality.error;
  }
  *cells << num(v.quality.kldMean, 4) << num(v.quality.kldP99, 4)
         << QStringLiteral("%1%").arg(num(100.0 * v.quality.top1Agreement, 1))
         << QObject::tr("%1 (first: %2)")
                .arg(num(v.quality.perplexity, 3), num(v.quality.referencePerplexity, 3));
  return {};
}

}  // namespace

QVector<CompareReportChart> compareReportCharts(const QString& reportPath) {
  const QString stem = QFileInfo(reportPath).completeBaseName();
  QVector<CompareReportChart> charts;
  for (int m = 0; m < kCompareMetricCount; ++m) {
    const auto metric = static_cast<CompareMetric>(m);
    charts.push_back(
        {metric, stem + QLatin1Char('-') + compareMetricSlug(metric) + QStringLiteral(".png")});
  }
  return charts;
}

QString compareToMarkdown(const CompareRun& run, const QVector<CompareReportChart>& charts) {
  const CompareSpec& spec = run.spec;
  QStringList names;
  for (const CompareVariant& v : run.variants) names << md(v.name);
  QStringList out;
  out << QObject::tr("# Comparison: %1").arg(names.join(QObject::tr(" vs "))) << QString();

  const QStringList devices = compareDevices(run.variants);
  out << QObject::tr("- **Date:** %1")
             .arg(run.finished.isValid()
                      ? run.finished.toUTC().toString(QStringLiteral("yyyy-MM-dd HH:mm 'UTC'"))
                      : QObject::tr("not recorded"))
      << QObject::tr("- **Device:** %1")
             .arg(devices.isEmpty() ? QObject::tr("not recorded")
                                    : md(devices.join(QStringLiteral("; "))));
  out << QObject::tr("- **Models** (the first is the reference):");
  for (qsizetype i = 0; i < spec.models.size(); ++i)
    out << QStringLiteral("  %1. %2 — %3")
               .arg(i + 1)
               .arg(md(QFileInfo(spec.models[i]).fileName()), md(spec.models[i]));
  QStringList levels, requests;
  for (int level : spec.concurrency) {
    levels << QString::number(level);
    requests << QString::number(promptsForLevel(spec, level));
  }
  out << QObject::tr("- **Concurrency levels:** %1 (requests sent per level: %2)")
             .arg(levels.join(QStringLiteral(", ")), requests.join(QStringLiteral(", ")))
      << QObject::tr(
             "- **Lengths:** prompt %1 tokens (random token ids), output %2 tokens (end "
             "of text ignored), context %3 tokens per sequence")
             .arg(spec.inputLen)
             .arg(spec.outputLen)
             .arg(spec.maxModelLen)
      << QObject::tr("- **Batch 1:** mean of %1 requests after one warm-up").arg(spec.latencyIters);
  if (spec.evalText.isEmpty())
    out << QObject::tr("- **Quality:** not measured (no held-out text)");
  else
    out << QObject::tr(
               "- **Quality:** against the first model on %1, up to %2 windows of %3 "
               "tokens (lathe eval)")
               .arg(md(QFileInfo(spec.evalText).fileName()))
               .arg(spec.evalWindows)
               .arg(spec.evalContext);
  out << QString();

  out << QObject::tr("## Results") << QString();
  out << header({QObject::tr("Model"), QObject::tr("Storage"), QObject::tr("Size"),
                 QObject::tr("Bits/weight"), QObject::tr("KV cache"), QObject::tr("Batch-1 tok/s"),
                 QObject::tr("Latency (ms)"), QObject::tr("Prefill tok/s"),
                 QObject::tr("TTFT (ms)"), QObject::tr("Mean KLD"), QObject::tr("KLD p99"),
                 QObject::tr("Top-1 agreement"), QObject::tr("Perplexity")});
  QStringList notes;
  for (int i = 0; i < run.variants.size(); ++i) {
    const CompareVariant& v = run.variants[i];
    QStringList cells{md(v.name),
                      md(v.dtype),
                      formatBytes(v.weightBytes),
                      num(v.bitsPerWeight, 2),
                      formatBytes(v.kvCacheBytes),
                      num(v.batch1TokensPerSec, 1),
                      num(v.batch1LatencyMs, 0),
                      num(v.prefillTokensPerSec, 0),
                      num(v.ttftMs, 1)};
    const QString qualityError = qualityCells(v, i, &cells);
    out << row(cells);
    if (!v.error.isEmpty()) notes << QObject::tr("- %1: %2").arg(md(v.name), md(v.error));
    if (!qualityError.isEmpty())
      notes << QObject::tr("- %1, quality: %2").arg(md(v.name), md(qualityError));
  }
  if (!notes.isEmpty()) out << QString() << notes;
  out << QString();

  out << QObject::tr("## Serving sweep") << QString();
  out << header({QObject::tr("Model"), QObject::tr("Concurrency"), QObject::tr("Completed"),
                 QObject::tr("Failed"), QObject::tr("Output tok/s"), QObject::tr("Requests/s"),
                 QObject::tr("TTFT p50 (ms)"), QObject::tr("TTFT p99 (ms)"),
                 QObject::tr("ITL p50 (ms)"), QObject::tr("ITL p99 (ms)")});
  for (const CompareVariant& v : run.variants)
    for (const ComparePoint& p : v.sweep)
      out << row({md(v.name), QString::number(p.concurrency), QString::number(p.completed),
                  QString::number(p.failed), num(p.outputTokensPerSec, 1), num(p.requestsPerSec, 2),
                  num(p.ttftP50Ms, 1), num(p.ttftP99Ms, 1), num(p.itlP50Ms, 2),
                  num(p.itlP99Ms, 2)});
  out << QString();

  out << QObject::tr("## Verdict") << QString()
      << (run.verdict.isEmpty() ? QObject::tr("No verdict: fewer than two variants were measured.")
                                : md(run.verdict))
      << QString();

  if (!charts.isEmpty()) {
    out << QObject::tr("## Charts") << QString();
    for (const CompareReportChart& c : charts) {
      const QString title = compareMetricTitle(c.metric);
      out << QStringLiteral("### %1").arg(md(title)) << QString()
          << QStringLiteral("![%1](%2)")
                 .arg(md(title), QString::fromUtf8(QUrl::toPercentEncoding(c.fileName)))
          << QString();
    }
  }
  return out.join(QLatin1Char('\n'));
}

}  // namespace lathe::ui
