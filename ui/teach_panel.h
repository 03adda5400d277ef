#pragma once
// Teach mode: step through a strategy's schedule one instruction at a time — forward, back, to the
// next backward step, or playing at a chosen speed — with a sentence saying what happens and why
// (analysis/explain.h). A second strategy can run beside it in lockstep: both take the same
// number of instructions per step, and "next backward" moves both to the backward of the same
// node, which every schedule issues in the same canonical order.
//
// The panel only steps and talks; the window connects stepped() to the graph view (live values,
// the current node), the schedule matrix (the current stage) and the memory chart (a cursor).
#include <QTimer>
#include <QWidget>
#include <memory>
#include <optional>
#include <vector>

#include "analysis/explain.h"
#include "ui/node_marks.h"
#include "ui/snapshots.h"

QT_BEGIN_NAMESPACE
class QComboBox;
class QLabel;
class QProgressBar;
class QPushButton;
class QSlider;
class QSpinBox;
QT_END_NAMESPACE

namespace rl::ui {

struct ScheduleTrace;

// The time (ms) at which instruction `index` starts in a timeline (where the next one starts when
// it has no event of its own), for the memory chart's cursor.
std::optional<double> instruction_time(const Timeline& t, long index);

class TeachPanel : public QWidget {
    Q_OBJECT
  public:
    explicit TeachPanel(QWidget* parent = nullptr);
    ~TeachPanel() override;

    // The strategies to choose from (those with a plan); keeps the choice when the specs match.
    void setResults(const std::vector<StrategyResult>& results);
    // Which result each side shows (-1 on the right: none).
    void setStrategies(int left, int right);
    int leftStrategy() const { return left_.index; }
    int rightStrategy() const { return right_.index; }

    // Instructions applied so far on the left (0 = before the first); the current instruction is
    // position − 1.
    long position() const;
    long size() const;
    void seek(long position);
    void stepForward();
    void stepBack();
    void nextBackward();  // both sides: to the next Backward (the same node on the right)
    void play(bool on);
    bool playing() const { return timer_.isActive(); }
    void setSpeed(int instructions_per_second);

    // The left side's state, for the views and the tests.
    const ScheduleState* state() const;
    const Explanation* explanation() const;  // null at position 0
    std::shared_ptr<const ScheduleTrace> trace() const;
    const ScheduleState* rightState() const;
    const Explanation* rightExplanation() const;
    QString sentence() const;  // the left side's text as shown

    // The node selected in the schedule views: a line under the controls lists its instructions
    // on the left (#12 compute · #57 recompute · #80 backward, the current one highlighted) and
    // "Next of node" (N) jumps to the next of them.
    void setSelectedNode(int node);
    int selectedNode() const { return selected_node_; }
    // Moves to the selected node's next instruction after the current one (wrapping around to the
    // start): that instruction becomes the current one. False when the node has none.
    bool seekNextOfNode();
    QString nodeLine() const;  // the line as shown, as plain text (tests)

  signals:
    void stepped();
    void leftStrategyChanged(int index);

  private:
    struct Lane {
        int index = -1;
        std::shared_ptr<const ScheduleTrace> trace;
        std::unique_ptr<ScheduleExplainer> explainer;
        std::unique_ptr<ScheduleCursor> cursor;
        std::optional<Explanation> explanation;
        QComboBox* combo = nullptr;
        QLabel* what = nullptr;
        QLabel* why = nullptr;
        QLabel* where = nullptr;
        QProgressBar* live = nullptr;
        QWidget* box = nullptr;
    };
    QWidget* buildLane(Lane& lane, bool right);
    void bind(Lane& lane, int index);
    void refresh(Lane& lane);
    void moveTo(long position);
    void moveBy(long delta);
    void updateControls();
    void updateNodeLine();

    std::vector<StrategyResult> results_;
    Lane left_, right_;
    QPushButton *start_ = nullptr, *back_ = nullptr, *forward_ = nullptr, *next_bwd_ = nullptr,
                *play_ = nullptr;
    QSlider* slider_ = nullptr;
    QSpinBox* speed_ = nullptr;
    QLabel* counter_ = nullptr;
    QLabel* node_line_ = nullptr;
    QPushButton* node_next_ = nullptr;
    int selected_node_ = -1;
    std::vector<NodeMark> node_marks_;  // of selected_node_ in the left strategy's schedule
    std::shared_ptr<const ScheduleTrace> node_marks_of_;
    QTimer timer_;
    bool updating_ = false;
};

}  // namespace rl::ui
