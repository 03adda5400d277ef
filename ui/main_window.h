#pragma once
// The desktop app's window: a setup dock (network, strategies, budget, run options) on the left;
// the memory and Pareto charts above the results table in the middle; an inline message for
// anything that went wrong; progress and Cancel in the status bar. Every computation goes through
// the RunController, off the GUI thread.
#include <QMainWindow>
#include <QPointer>
#include <QStringList>
#include <QTimer>
#include <memory>
#include <optional>
#include <vector>

#include "engine/params.h"

#include "ui/chart_export.h"
#include "ui/message_widget.h"
#include "ui/run_controller.h"
#include "ui/snapshots.h"

QT_BEGIN_NAMESPACE
class QAction;
class QCheckBox;
class QComboBox;
class QDockWidget;
class QGroupBox;
class QLabel;
class QLineEdit;
class QMenu;
class QProgressBar;
class QPushButton;
class QSlider;
class QSortFilterProxyModel;
class QSpinBox;
class QSplitter;
class QStackedWidget;
class QTabWidget;
class QTableView;
class QToolButton;
class QVBoxLayout;
QT_END_NAMESPACE

namespace rl::ui {

class GraphView;
class MemoryChart;
class ResidualsPanel;
class ScheduleMatrixView;
class ScheduleViews;
class TeachPanel;
class TourPanel;
struct Session;
class ParamForm;
class ParetoChart;
class ResultsModel;

class MainWindow : public QMainWindow {
    Q_OBJECT
  public:
    // `restore_settings` false: start from the defaults and save nothing (tests, screenshots).
    explicit MainWindow(bool restore_settings = true, QWidget* parent = nullptr);
    ~MainWindow() override;

    // A preset spec ("mlp:depth=8") or a network file; loads it off the GUI thread.
    void setNetworkSpec(const QString& spec);
    void openFile(const QString& path);
    // Ticks exactly these strategies, with their parameters; a `budget=` sets the slider. A
    // strategy named twice or more gets a box per instance ("periodic:k=2;periodic:k=4").
    void setStrategies(const QStringList& specs);
    // Adds a box for another instance of `name` (what its "+" button does); returns its index
    // among the boxes of that strategy, or -1 for an unknown name.
    int duplicateStrategy(const QString& name);
    int strategyBoxCount(const QString& name) const;
    void setBudget(std::optional<uint64_t> bytes);
    void setThreads(int threads);
    void setCap(const QString& text);

    QString networkSpec() const;
    QStringList strategySpecs() const;  // the ticked strategies as they will be planned
    QStringList sweepSpecs() const;     // the ticked instances as a sweep takes them: no budget
    std::optional<uint64_t> budget() const;
    bool isNetworkReady() const { return network_ready_; }
    const NetworkSummary& network() const { return network_; }
    bool running() const;

    // Run the ticked strategies (after the network has loaded); Esc / cancelRun() stops it.
    void startRun();
    void cancelRun();
    // Sweep the ticked instances (and the optimal frontier) for the Pareto chart, off the GUI
    // thread: `points` budgets per budgeted strategy; `execute` also runs and measures each point.
    void startSweep();
    void setSweepPoints(int points);
    void setSweepExecutes(bool execute);

    RunController* controller() const { return controller_; }
    ResultsModel* resultsModel() const { return model_; }
    MemoryChart* memoryChart() const { return memory_; }
    ParetoChart* paretoChart() const { return pareto_; }
    // The schedule views (ui/main_window_schedule.cpp): graph, matrix, saved residuals, teach
    // mode and the guided tours.
    GraphView* graphView() const { return graph_view_; }
    ScheduleMatrixView* scheduleMatrix() const { return matrix_view_; }
    ResidualsPanel* residualsPanel() const { return residuals_panel_; }
    TeachPanel* teachPanel() const { return teach_panel_; }
    ScheduleViews* scheduleViews() const { return schedule_views_; }
    TourPanel* tourPanel() const { return tour_panel_; }
    void showTeachMode(bool on);
    void showScheduleTab(int which);  // 0 graph, 1 matrix, 2 saved residuals
    void startTour(int tour);
    // Sessions: "" on success, else what went wrong. Opening shows the saved results as they
    // were (nothing is planned or run again).
    QString saveSession(const QString& path) const;
    QString openSession(const QString& path);
    // A session whose network file is gone (moved, deleted, or no longer loads) still opens: the
    // strategies, settings and saved results come back, drawn from the copy of the network the
    // session holds, and a warning names the missing path with a "Locate…" button (a file
    // dialog). missingNetwork() is that path ("" when none); locateNetwork() loads the file found
    // there instead and shows the saved results again once it has loaded, if it is the same
    // network (same node count), else plans anew and says so.
    QString missingNetwork() const { return missing_network_; }
    void locateNetwork(const QString& path);
    QTableView* resultsTable() const { return table_; }
    QString messageText() const { return message_->text(); }
    MessageWidget::Kind messageKind() const { return message_->kind(); }
    QString statusText() const;

    // Writes a chart (png/svg/pdf/csv/json by suffix) at `size`; "" on success.
    QString exportChart(ChartKind kind, const QString& path, QSize size) const;
    ExportInput exportInput() const;

  signals:
    void networkReady();  // a network loaded (or failed to: networkFailed)
    void networkFailed(const QString& message);
    void planReady();       // predicted figures for the ticked strategies are in the table
    void runCompleted();    // a run finished, failed or was cancelled
    void sweepCompleted();  // a sweep finished, failed or was cancelled

  protected:
    void closeEvent(QCloseEvent* event) override;

  private:
    // One instance of a strategy: a check box with its name, "+" for another instance ("×"
    // removes a copy), and its parameter form, shown while it is ticked.
    struct StrategyBox {
        QString name;
        QWidget* frame = nullptr;
        QCheckBox* check = nullptr;
        ParamForm* form = nullptr;
        bool budgeted = false;
        bool copy = false;
        Spec spec() const;  // without the budget
    };

    QWidget* buildNetworkPanel();
    QWidget* buildStrategyPanel();
    QWidget* buildRunPanel();
    QWidget* buildParetoPage();
    StrategyBox* addStrategyBox(const Strategy& s, bool copy);
    void removeStrategyBox(StrategyBox* box);
    void fitTableColumns();
    void buildActions();
    void buildCentral();

    void scheduleNetworkLoad(int delay_ms);
    void loadNetworkNow();
    void schedulePlan();
    void planNow();
    RunRequest request() const;
    std::optional<uint64_t> sliderBytes() const;
    void updateBudgetLabel();
    void updateSummary();
    void updateRunState(bool busy);

    void onNetworkAvailable(quint64 job, const NetworkSummary& s);
    void onPlanAvailable(quint64 job, const RunSummary& plan);
    void onProgress(quint64 job, const ProgressSnapshot& p);
    void onResult(quint64 job, int index, const StrategyResult& r);
    void onRunFinished(quint64 job, const RunSummary& s);
    void onFailed(quint64 job, FailureKind kind, const QString& message);
    void onSweepProgress(quint64 job, int done, int total, const QString& spec);
    void onSweepAvailable(quint64 job, const SweepSummary& s);
    void dropStaleSweeps();
    void reportFailures(const std::vector<StrategyResult>& results);

    void exportChartDialog();
    void exportDataDialog();
    void copyCsv();
    void openDialog();
    void addRecentFile(const QString& path);
    void rebuildRecentMenu();
    void about();
    void buildScheduleViews();
    bool applyPendingSession();
    void restoreSessionWithoutNetwork(const QString& path, const QString& reason);
    void locateNetworkDialog();
    void saveSessionDialog();
    void openSessionDialog();
    void exportNetworkDialog();
    void exportScheduleDialog();
    void loadSettings();
    void saveSettings() const;

    RunController* controller_ = nullptr;
    ResultsModel* model_ = nullptr;
    QSortFilterProxyModel* proxy_ = nullptr;
    QTableView* table_ = nullptr;
    MemoryChart* memory_ = nullptr;
    ParetoChart* pareto_ = nullptr;
    QTabWidget* charts_ = nullptr;
    GraphView* graph_view_ = nullptr;
    ScheduleMatrixView* matrix_view_ = nullptr;
    ResidualsPanel* residuals_panel_ = nullptr;
    TeachPanel* teach_panel_ = nullptr;
    ScheduleViews* schedule_views_ = nullptr;
    TourPanel* tour_panel_ = nullptr;
    QDockWidget* teach_dock_ = nullptr;
    QDockWidget* tour_dock_ = nullptr;
    std::shared_ptr<Session> pending_session_;   // opened, waiting for its network to load
    std::shared_ptr<Session> detached_session_;  // opened without its network file (see above)
    QString missing_network_;
    QSplitter* splitter_ = nullptr;
    MessageWidget* message_ = nullptr;

    QComboBox* preset_ = nullptr;
    QStackedWidget* preset_forms_ = nullptr;
    std::vector<ParamForm*> preset_param_forms_;
    QLabel* summary_ = nullptr;
    QPushButton* open_button_ = nullptr;
    QString file_spec_;  // the opened network file, "" = a preset

    std::vector<std::unique_ptr<StrategyBox>> strategy_boxes_;
    QVBoxLayout* strategy_layout_ = nullptr;
    QGroupBox* budget_box_ = nullptr;
    QSlider* budget_slider_ = nullptr;
    QLabel* budget_label_ = nullptr;

    QComboBox* device_ = nullptr;
    QSpinBox* threads_ = nullptr;
    QLineEdit* cap_ = nullptr;
    QPushButton* run_button_ = nullptr;
    QPushButton* cancel_button_ = nullptr;
    QCheckBox* show_predicted_ = nullptr;
    QCheckBox* show_measured_ = nullptr;
    QSpinBox* sweep_points_ = nullptr;
    QCheckBox* sweep_execute_ = nullptr;
    QPushButton* sweep_button_ = nullptr;
    QPushButton* sweep_clear_ = nullptr;

    QLabel* status_label_ = nullptr;
    QProgressBar* progress_ = nullptr;

    QAction* open_action_ = nullptr;
    QAction* run_action_ = nullptr;
    QAction* cancel_action_ = nullptr;
    QAction* sweep_action_ = nullptr;
    QAction* export_chart_action_ = nullptr;
    QAction* export_data_action_ = nullptr;
    QAction* copy_action_ = nullptr;
    QMenu* recent_menu_ = nullptr;
    QStringList recent_files_;

    QTimer network_timer_, plan_timer_;
    bool restore_ = true;
    bool network_ready_ = false;
    bool run_when_ready_ = false;
    bool suppress_ = false;  // while the window sets its own fields
    NetworkSummary network_;
    QString loading_spec_;
    quint64 network_job_ = 0, plan_job_ = 0, run_job_ = 0, sweep_job_ = 0;
    RunRequest run_request_;
    int live_index_ = -2;
    std::optional<uint64_t> pending_budget_;
    std::optional<double> baseline_ms_;
    std::vector<SweepCurve> sweeps_;
};

}  // namespace rl::ui
