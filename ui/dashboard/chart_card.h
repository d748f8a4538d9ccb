// One dashboard chart: title, a one-line summary of the latest values, a short "what am I looking
// at" caption, the plot, and buttons that export it as PNG or CSV. Colors follow the widget palette
// (light and dark). The QCustomPlot header stays in the .cpp so includers do not pay for it.
#pragma once

#include <QFrame>
#include <QPointF>
#include <QVector>

class QCustomPlot;
class QLabel;
class QToolButton;

namespace lathe::ui {

class ChartCard : public QFrame {
  Q_OBJECT
 public:
  enum class Axis { kLeft, kRight };
  // kHidden: kept (CSV export) but neither drawn nor in the legend.
  enum class Style { kLine, kStep, kDashed, kPoints, kHidden };

  ChartCard(const QString& title, const QString& caption, QWidget* parent = nullptr);

  QString title() const { return m_title; }
  QCustomPlot* plot() const { return m_plot; }

  // Adds a series; returns its index for setSeries(). Names become legend entries and CSV columns.
  int addSeries(const QString& name, const QColor& color, Style style = Style::kLine,
                Axis axis = Axis::kLeft);
  void setSeries(int index, const QVector<QPointF>& points);
  int dataCount(int index) const;

  void setAxisLabels(const QString& left, const QString& right = QString());
  // x range in seconds; the value axes rescale to the visible data (starting at 0; `minLeftMax`
  // keeps a flat-zero chart from collapsing).
  void setTimeRange(double from, double to, double minLeftMax = 1.0);
  // Pins an axis to [lower, upper] instead of rescaling it (percentages).
  void setFixedValueRange(Axis axis, double lower, double upper);
  void setSummary(const QString& text);
  QString summary() const;
  void replot();

  // Exports. Errors name the file and the cause.
  bool exportPng(const QString& path, QString* error = nullptr);
  bool exportCsv(const QString& path, QString* error = nullptr);
  // The CSV: a header "time_s,<series>…" when every series shares the same times, else long form
  // "time_s,series,value". NaN gaps are empty cells.
  QString csvText() const;

 signals:
  void exported(const QString& path);
  void exportFailed(const QString& message);

 protected:
  void changeEvent(QEvent* event) override;

 private:
  void applyPalette();
  void askExport(bool png);

  QString m_title;
  QLabel* m_summary = nullptr;
  QCustomPlot* m_plot = nullptr;
  bool m_fixed[2] = {false, false};  // per Axis: pinned range
};

}  // namespace lathe::ui
