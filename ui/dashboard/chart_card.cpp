#include "ui/dashboard/chart_card.h"

#include <qcustomplot.h>

#include <QDateTime>
#include <QEvent>
#include <QFile>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QLabel>
#include <QSaveFile>
#include <QStandardPaths>
#include <QTextStream>
#include <QToolButton>
#include <QVBoxLayout>

#include <cmath>

namespace lathe::ui {

namespace {

QString slug(const QString& title) {
  QString s = title.toLower();
  for (QChar& c : s)
    if (!c.isLetterOrNumber()) c = u'-';
  while (s.contains(QStringLiteral("--"))) s.replace(QStringLiteral("--"), QStringLiteral("-"));
  return s.remove(QRegularExpression(QStringLiteral("^-|-$")));
}

QString formatCell(double v) {
  return std::isnan(v) ? QString() : QString::number(v, 'g', 10);
}

}  // namespace

ChartCard::ChartCard(const QString& title, const QString& caption, QWidget* parent)
    : QFrame(parent), m_title(title) {
  setObjectName(QStringLiteral("chart-") + slug(title));
  setFrameShape(QFrame::StyledPanel);
  auto* root = new QVBoxLayout(this);
  root->setContentsMargins(8, 6, 8, 6);
  root->setSpacing(2);

  auto* header = new QHBoxLayout;
  auto* titleLabel = new QLabel(QStringLiteral("<b>%1</b>").arg(title.toHtmlEscaped()));
  m_summary = new QLabel;
  m_summary->setObjectName(QStringLiteral("summary"));
  m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
  header->addWidget(titleLabel);
  header->addSpacing(8);
  header->addWidget(m_summary, 1);
  for (bool png : {true, false}) {
    auto* button = new QToolButton;
    button->setObjectName(png ? QStringLiteral("exportPng") : QStringLiteral("exportCsv"));
    button->setText(png ? tr("PNG") : tr("CSV"));
    button->setIcon(QIcon(QStringLiteral(":/icons/export.svg")));
    button->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
    button->setAutoRaise(true);
    button->setToolTip(png ? tr("Save this chart as a PNG image")
                           : tr("Save this chart's data (the visible window) as CSV"));
    connect(button, &QToolButton::clicked, this, [this, png] { askExport(png); });
    header->addWidget(button);
  }
  root->addLayout(header);

  auto* captionLabel = new QLabel(caption);
  captionLabel->setObjectName(QStringLiteral("caption"));
  captionLabel->setWordWrap(true);
  QFont small = captionLabel->font();
  small.setPointSizeF(small.pointSizeF() * 0.9);
  captionLabel->setFont(small);
  captionLabel->setForegroundRole(QPalette::PlaceholderText);
  root->addWidget(captionLabel);

  m_plot = new QCustomPlot;
  m_plot->setMinimumHeight(170);
  m_plot->setNoAntialiasingOnDrag(true);
  m_plot->setNotAntialiasedElements(QCP::aeAll);  // cheap redraws at 10 Hz
  QSharedPointer<QCPAxisTickerTime> ticker(new QCPAxisTickerTime);
  ticker->setTimeFormat(QStringLiteral("%m:%s"));
  m_plot->xAxis->setTicker(ticker);
  m_plot->xAxis->setLabel(tr("time since load (mm:ss)"));
  m_plot->legend->setVisible(true);
  m_plot->legend->setFont(small);
  m_plot->legend->setRowSpacing(-2);
  m_plot->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignLeft);
  root->addWidget(m_plot, 1);
  applyPalette();
}

int ChartCard::addSeries(const QString& name, const QColor& color, Style style, Axis axis) {
  QCPAxis* valueAxis = axis == Axis::kRight ? m_plot->yAxis2 : m_plot->yAxis;
  if (axis == Axis::kRight) m_plot->yAxis2->setVisible(true);
  QCPGraph* g = m_plot->addGraph(m_plot->xAxis, valueAxis);
  g->setName(name);
  QPen pen(color, 1.6);
  if (style == Style::kDashed) pen.setStyle(Qt::DashLine);
  g->setPen(pen);
  if (style == Style::kStep) g->setLineStyle(QCPGraph::lsStepLeft);
  if (style == Style::kHidden) {
    g->setVisible(false);
    g->removeFromLegend();
  }
  if (style == Style::kPoints) {
    g->setLineStyle(QCPGraph::lsNone);
    g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, color, color, 5));
  }
  return m_plot->graphCount() - 1;
}

void ChartCard::setSeries(int index, const QVector<QPointF>& points) {
  QCPGraph* g = m_plot->graph(index);
  if (g == nullptr) return;
  QVector<QCPGraphData> data;
  data.reserve(points.size());
  for (const QPointF& p : points) data.push_back(QCPGraphData(p.x(), p.y()));
  g->data()->set(data, true);
}

int ChartCard::dataCount(int index) const {
  QCPGraph* g = m_plot->graph(index);
  return g == nullptr ? 0 : g->data()->size();
}

void ChartCard::setAxisLabels(const QString& left, const QString& right) {
  m_plot->yAxis->setLabel(left);
  m_plot->yAxis2->setLabel(right);
}

void ChartCard::setTimeRange(double from, double to, double minLeftMax) {
  m_plot->xAxis->setRange(from, to);
  for (QCPAxis* axis : {m_plot->yAxis, m_plot->yAxis2}) {
    if (!axis->visible() || m_fixed[axis == m_plot->yAxis ? 0 : 1]) continue;
    double maxValue = axis == m_plot->yAxis ? minLeftMax : 1.0;
    for (QCPGraph* g : axis->graphs()) {
      if (!g->visible()) continue;
      bool found = false;
      const QCPRange r = g->getValueRange(found, QCP::sdBoth, QCPRange(from, to));
      if (found && std::isfinite(r.upper)) maxValue = std::max(maxValue, r.upper);
    }
    axis->setRange(0.0, maxValue * 1.12);
  }
}

void ChartCard::setFixedValueRange(Axis axis, double lower, double upper) {
  m_fixed[axis == Axis::kLeft ? 0 : 1] = true;
  (axis == Axis::kLeft ? m_plot->yAxis : m_plot->yAxis2)->setRange(lower, upper);
}

void ChartCard::setSummary(const QString& text) {
  m_summary->setText(text);
}
QString ChartCard::summary() const {
  return m_summary->text();
}

void ChartCard::replot() {
  m_plot->replot(QCustomPlot::rpQueuedReplot);
}

bool ChartCard::exportPng(const QString& path, QString* error) {
  m_plot->replot(QCustomPlot::rpImmediateRefresh);
  if (!m_plot->savePng(path, 0, 0, 1.0, -1, 96)) {
    if (error) *error = tr("Could not write the image %1 (is the folder writable?)").arg(path);
    return false;
  }
  return true;
}

QString ChartCard::csvText() const {
  QString out;
  QTextStream s(&out);
  const int n = m_plot->graphCount();
  bool sameKeys = n > 0;
  for (int i = 1; i < n && sameKeys; ++i) {
    const auto* a = m_plot->graph(0)->data().data();
    const auto* b = m_plot->graph(i)->data().data();
    sameKeys =
        a->size() == b->size() &&
        std::equal(a->constBegin(), a->constEnd(), b->constBegin(),
                   [](const QCPGraphData& x, const QCPGraphData& y) { return x.key == y.key; });
  }
  if (sameKeys) {
    s << "time_s";
    for (int i = 0; i < n; ++i) s << ',' << m_plot->graph(i)->name();
    s << '\n';
    const auto* first = m_plot->graph(0)->data().data();
    for (int row = 0; row < first->size(); ++row) {
      s << QString::number(first->at(row)->key, 'f', 3);
      for (int i = 0; i < n; ++i) s << ',' << formatCell(m_plot->graph(i)->data()->at(row)->value);
      s << '\n';
    }
  } else {
    s << "time_s,series,value\n";
    for (int i = 0; i < n; ++i) {
      const QCPGraph* g = m_plot->graph(i);
      for (auto it = g->data()->constBegin(); it != g->data()->constEnd(); ++it)
        s << QString::number(it->key, 'f', 3) << ',' << g->name() << ',' << formatCell(it->value)
          << '\n';
    }
  }
  return out;
}

bool ChartCard::exportCsv(const QString& path, QString* error) {
  QSaveFile file(path);
  if (!file.open(QIODevice::WriteOnly | QIODevice::Text)) {
    if (error) *error = tr("Could not write %1: %2").arg(path, file.errorString());
    return false;
  }
  file.write(csvText().toUtf8());
  if (!file.commit()) {
    if (error) *error = tr("Could not write %1: %2").arg(path, file.errorString());
    return false;
  }
  return true;
}

void ChartCard::askExport(bool png) {
  const QString dir = QStandardPaths::writableLocation(png ? QStandardPaths::PicturesLocation
                                                           : QStandardPaths::DocumentsLocation);
  const QString name =
      QStringLiteral("lathe-%1-%2.%3")
          .arg(slug(m_title),
               QDateTime::currentDateTime().toString(QStringLiteral("yyyyMMdd-HHmmss")),
               png ? QStringLiteral("png") : QStringLiteral("csv"));
  const QString path = QFileDialog::getSaveFileName(
      this, png ? tr("Export chart as PNG") : tr("Export chart data as CSV"), dir + '/' + name,
      png ? tr("PNG images (*.png)") : tr("CSV files (*.csv)"));
  if (path.isEmpty()) return;
  QString error;
  const bool ok = png ? exportPng(path, &error) : exportCsv(path, &error);
  if (ok)
    emit exported(path);
  else
    emit exportFailed(error);
}

void ChartCard::changeEvent(QEvent* event) {
  QFrame::changeEvent(event);
  if (event->type() == QEvent::PaletteChange) applyPalette();
}

void ChartCard::applyPalette() {
  const QPalette pal = palette();
  const QColor text = pal.color(QPalette::WindowText);
  QColor grid = pal.color(QPalette::Mid);
  grid.setAlpha(110);
  m_plot->setBackground(pal.brush(QPalette::Base));
  m_plot->legend->setBrush(QColor(pal.color(QPalette::Base).red(),
                                  pal.color(QPalette::Base).green(),
                                  pal.color(QPalette::Base).blue(), 200));
  m_plot->legend->setTextColor(text);
  m_plot->legend->setBorderPen(QPen(grid));
  for (QCPAxis* axis : {m_plot->xAxis, m_plot->yAxis, m_plot->yAxis2}) {
    axis->setBasePen(QPen(text));
    axis->setTickPen(QPen(text));
    axis->setSubTickPen(QPen(text));
    axis->setTickLabelColor(text);
    axis->setLabelColor(text);
    axis->grid()->setPen(QPen(grid, 1, Qt::DotLine));
    axis->grid()->setZeroLinePen(QPen(grid));
  }
  m_plot->yAxis2->grid()->setVisible(false);
  m_plot->replot();
}

}  // namespace lathe::ui
