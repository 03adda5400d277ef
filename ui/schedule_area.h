#pragma once
// The schedule views as the window shows them: the graph, the schedule matrix and the saved
// residuals as pages of the results area, teach mode in a dock below, the guided tours in a dock
// on the right, and the teach cursor on the memory chart. ScheduleViews keeps them in step with
// the results model and the table's current row.
//
// A tour step needs the window to load its network and strategies: the area emits
// tourStepRequested, and once the step's plan is in the model the window calls showTourStep.
#include <QObject>
#include <QString>
#include <vector>

#include "ui/snapshots.h"

QT_BEGIN_NAMESPACE
class QAction;
class QDockWidget;
class QMainWindow;
class QMenu;
QT_END_NAMESPACE

namespace rl::ui {

class GraphView;
class MemoryProfilerPage;
class ResidualsPanel;
class ResultsArea;
class ScheduleMatrixView;
class ScheduleViews;
class TeachPanel;
class TourPanel;
struct TourStep;

class ScheduleArea : public QObject {
    Q_OBJECT
  public:
    // Adds its pages to `results` and its docks to `window`.
    ScheduleArea(ResultsArea* results, QMainWindow* window);

    GraphView* graphView() const { return graph_view_; }
    ScheduleMatrixView* scheduleMatrix() const { return matrix_view_; }
    ResidualsPanel* residualsPanel() const { return residuals_panel_; }
    TeachPanel* teachPanel() const { return teach_panel_; }
    ScheduleViews* scheduleViews() const { return schedule_views_; }
    TourPanel* tourPanel() const { return tour_panel_; }
    MemoryProfilerPage* memoryProfiler() const { return memory_profiler_; }

    void showTeachMode(bool on);
    bool teachModeShown() const;  // its dock is shown (not hidden), whether the window is or not
    void showScheduleTab(int which);  // 0 graph, 1 matrix, 2 saved residuals
    void startTour(int tour);
    // Teach mode, the strategies and the view a tour step asks for, over the step's plan; the
    // tour's text is written from `network` and `results`, what the window shows.
    void showTourStep(const TourStep& step, const NetworkSummary& network,
                      const std::vector<StrategyResult>& results);

    // For the window's menus: View › Graph, Schedule matrix, Saved residuals (Ctrl+3..5) and
    // Teach mode (Ctrl+T); Help › Guided tours.
    QList<QAction*> viewActions() const { return view_actions_; }
    QMenu* toursMenu() const { return tours_menu_; }

  signals:
    void tourStepRequested(const TourStep& step);

  private:
    void addMemoryProfiler();
    void addFindNode(QMainWindow* window);

    ResultsArea* results_;
    GraphView* graph_view_ = nullptr;
    ScheduleMatrixView* matrix_view_ = nullptr;
    ResidualsPanel* residuals_panel_ = nullptr;
    TeachPanel* teach_panel_ = nullptr;
    ScheduleViews* schedule_views_ = nullptr;
    TourPanel* tour_panel_ = nullptr;
    MemoryProfilerPage* memory_profiler_ = nullptr;
    QDockWidget* teach_dock_ = nullptr;
    QDockWidget* tour_dock_ = nullptr;
    QList<QAction*> view_actions_;
    QMenu* tours_menu_ = nullptr;
};

}  // namespace rl::ui
