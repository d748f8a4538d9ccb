#include "ui/quantize/goal_page.h"

#include <QButtonGroup>
#include <QDoubleSpinBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QRadioButton>
#include <QTableView>
#include <QVBoxLayout>

#include "ui/models/model_card.h"
#include "ui/quantize/candidate_table_model.h"
#include "ui/quantize/literature_quality.h"

namespace lathe::ui {

GoalPage::GoalPage(QWidget* parent) : QWizardPage(parent) {
  setTitle(tr("Step 1 — Goal and scheme"));
  setSubTitle(
      tr("What should the quantized model be good at? Every scheme is listed with what it "
         "costs; the recommended one is marked ★."));
  auto* layout = new QVBoxLayout(this);
  m_goals = new QButtonGroup(this);
  auto* goals = new QHBoxLayout;
  auto addGoal = [&](QuantGoal g, const QString& text, const QString& tip) {
    auto* b = new QRadioButton(text);
    b->setToolTip(tip);
    b->setObjectName(QStringLiteral("goal%1").arg(static_cast<int>(g)));
    m_goals->addButton(b, static_cast<int>(g));
    goals->addWidget(b);
    return b;
  };
  addGoal(QuantGoal::kFitBudget, tr("Fit in"),
          tr("The best expected quality whose weights and KV cache fit in this many GiB."));
  m_budget = new QDoubleSpinBox;
  m_budget->setObjectName(QStringLiteral("budgetGiB"));
  m_budget->setRange(0.01, 4096);
  m_budget->setDecimals(2);
  m_budget->setValue(8);
  m_budget->setSuffix(tr(" GiB"));
  goals->addWidget(m_budget);
  addGoal(QuantGoal::kBestQuality, tr("Best quality that fits"),
          tr("The best expected quality that fits this device with the current load settings."))
      ->setChecked(true);
  addGoal(QuantGoal::kFastest, tr("Fastest"),
          tr("The highest single-request decoding ceiling that fits this device."));
  addGoal(QuantGoal::kSpecific, tr("A specific scheme"),
          tr("No recommendation: pick a row yourself."));
  goals->addStretch(1);
  layout->addLayout(goals);

  m_model = new CandidateTableModel(this);
  m_view = new QTableView;
  m_view->setObjectName(QStringLiteral("candidateTable"));
  m_view->setModel(m_model);
  m_view->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_view->setSelectionMode(QAbstractItemView::SingleSelection);
  m_view->verticalHeader()->hide();
  m_view->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  m_view->horizontalHeader()->setStretchLastSection(true);
  layout->addWidget(m_view, 1);

  m_status = new QLabel(tr("Planning every scheme with the quantization library…"));
  m_status->setObjectName(QStringLiteral("candidateStatus"));
  m_status->setWordWrap(true);
  layout->addWidget(m_status);
  m_recommendation = new QLabel;
  m_recommendation->setObjectName(QStringLiteral("recommendation"));
  m_recommendation->setWordWrap(true);
  layout->addWidget(m_recommendation);
  m_bandwidth = new QLabel;
  m_bandwidth->setObjectName(QStringLiteral("bandwidthNote"));
  m_bandwidth->setWordWrap(true);
  m_bandwidth->setForegroundRole(QPalette::PlaceholderText);
  layout->addWidget(m_bandwidth);

  connect(m_goals, &QButtonGroup::idClicked, this, [this] { updateRecommendation(); });
  connect(m_budget, &QDoubleSpinBox::valueChanged, this, [this] {
    if (goal() == QuantGoal::kFitBudget) updateRecommendation();
  });
  connect(m_view->selectionModel(), &QItemSelectionModel::selectionChanged, this,
          &GoalPage::completeChanged);
}

void GoalPage::setCandidates(const QuantCandidates& candidates) {
  if (!candidates.error.isEmpty()) {
    m_status->setText(
        tr("Cannot plan a quantization of %1: %2").arg(candidates.modelPath, candidates.error));
    m_model->setCandidates({}, candidates.bandwidth.deviceLabel);
    emit completeChanged();
    return;
  }
  QVector<QuantCandidate> list = candidates.candidates;
  for (QuantCandidate& c : list)
    if (c.qualitySource != QualitySource::kMeasured) applyLiteratureQuality(c);
  m_model->setCandidates(list, candidates.bandwidth.deviceLabel);
  m_status->setText(tr("%1 (%2, %3 parameters): sizes are the library's plans; fits and speed use "
                       "the load settings of the Models page.")
                        .arg(candidates.model.name, candidates.model.dtype,
                             formatCount(candidates.model.numParameters)));
  m_bandwidth->setText(tr("Speed: %1 — %2, or \"measured\" by the Compare tab. Quality: "
                          "published figures for other models (\"literature\") until lathe eval "
                          "measures this one's outputs (\"measured\").")
                           .arg(candidates.bandwidth.deviceLabel, candidates.bandwidth.how));
  updateRecommendation();
}

QuantGoal GoalPage::goal() const {
  return static_cast<QuantGoal>(m_goals->checkedId());
}

void GoalPage::setGoal(QuantGoal goal) {
  m_goals->button(static_cast<int>(goal))->setChecked(true);
  updateRecommendation();
}

void GoalPage::setBudgetGiB(double gib) {
  m_budget->setValue(gib);
}

void GoalPage::updateRecommendation() {
  const auto budget = static_cast<qint64>(m_budget->value() * 1024.0 * 1024.0 * 1024.0);
  const Recommendation r = recommendCandidate(m_model->candidates(), goal(), budget);
  m_model->setRecommended(r.index);
  m_recommendation->setText(r.index >= 0 ? tr("★ Recommended — %1").arg(r.why) : r.why);
  if (r.index >= 0) m_view->selectRow(r.index);
  emit completeChanged();
}

QString GoalPage::recommendationText() const {
  return m_recommendation->text();
}

void GoalPage::selectScheme(const QString& scheme, int bits) {
  const QVector<QuantCandidate>& cs = m_model->candidates();
  for (int i = 0; i < cs.size(); ++i)
    if (cs[i].scheme == scheme && (bits == -1 || cs[i].bits == bits)) m_view->selectRow(i);
}

const QuantCandidate* GoalPage::chosen() const {
  const QModelIndexList rows = m_view->selectionModel()->selectedRows();
  if (rows.isEmpty()) return nullptr;
  const QuantCandidate& c = m_model->candidates()[rows.first().row()];
  return c.enabled ? &c : nullptr;
}

bool GoalPage::isComplete() const {
  return chosen() != nullptr;
}

}  // namespace lathe::ui
