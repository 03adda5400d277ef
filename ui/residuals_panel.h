#pragma once
// The saved residuals of a strategy's schedule as a table — the listing `rematlab-cli residuals`
// prints (strategies/policy.h, after jax.ad_checkpoint.print_saved_residuals): every value the
// forward keeps for the backward, with its type, bytes and where it comes from, and the total.
// Meant for policy strategies (which decide what is saved) but read off any schedule. A row of a
// node's output selects the node in the graph view and the matrix, and the other way round.
#include <QPointer>
#include <QWidget>
#include <memory>

#include "strategies/policy.h"

QT_BEGIN_NAMESPACE
class QLabel;
class QTableWidget;
QT_END_NAMESPACE

namespace rl::ui {

struct ScheduleTrace;
class NodeSelection;

class ResidualsPanel : public QWidget {
    Q_OBJECT
  public:
    explicit ResidualsPanel(QWidget* parent = nullptr);
    void setSelection(NodeSelection* selection);
    void setTrace(std::shared_ptr<const ScheduleTrace> trace);
    const SavedResiduals& residuals() const { return residuals_; }
    QTableWidget* table() const { return table_; }
    // The listing exactly as `rematlab-cli residuals` prints it.
    QString text() const;

  private:
    void onSelectionChanged(int node);

    std::shared_ptr<const ScheduleTrace> trace_;
    SavedResiduals residuals_;
    std::vector<int> row_node_;  // per row: the node whose output it is, or -1
    QTableWidget* table_ = nullptr;
    QLabel* header_ = nullptr;
    QLabel* total_ = nullptr;
    QPointer<NodeSelection> selection_;
    bool updating_ = false;
};

}  // namespace rl::ui
