#pragma once
// The desktop app's window. It holds the parts and wires them together: the setup panel (network,
// strategies, budget, run options) in a dock on the left; the results area (the memory and Pareto
// charts above the results table) in the middle, with the schedule views (graph, matrix, saved
// residuals, teach mode, tours) as its further pages and docks; an inline message for anything
// that went wrong; progress and Cancel in the status bar; the menus. Sessions go through the
// session controller. Every computation goes through the RunController, off the GUI thread.
#include <QMainWindow>
#include <QStringList>
#include <QTimer>
#include <memory>
#include <optional>
#include <vector>

#include "ui/chart_export.h"
#include "ui/message_widget.h"
#include "ui/run_controller.h"
#include "ui/snapshots.h"

QT_BEGIN_NAMESPACE
class QAction;
class QLabel;
class QMenu;
class QProgressBar;
class QTableView;
QT_END_NAMESPACE

namespace rl::ui {

class ExportDialogs;
class GraphView;
class MemoryChart;
class ParetoChart;
class ResidualsPanel;
class ResultsArea;
class ResultsModel;
class ScheduleArea;
class ScheduleMatrixView;
class ScheduleViews;
class SessionController;
class SetupPanel;
class TeachPanel;
class TourPanel;
struct TourStep;

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
    void setLinkGbps(double gbps);  // the host link offloads cross (Setup's "Host link")
    void setCap(const QString& text);

    QString networkSpec() const;
    QStringList strategySpecs() const;  // the ticked strategies as they will be planned
    QStringList sweepSpecs() const;     // the ticked instances as a sweep takes them: no budget
    std::optional<uint64_t> budget() const;
    bool isNetworkReady() const { return network_ready_; }
    // Whether Run (the button, the menu action, Ctrl+R) is enabled.
    bool isRunEnabled() const;
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
    MemoryChart* memoryChart() const;
    ParetoChart* paretoChart() const;
    // The parts.
    SetupPanel* setupPanel() const { return setup_; }
    ResultsArea* resultsArea() const { return results_; }
    ScheduleArea* scheduleArea() const { return schedule_; }
    SessionController* sessionController() const { return session_; }
    // The schedule views: graph, matrix, saved residuals, teach mode and the guided tours.
    GraphView* graphView() const;
    ScheduleMatrixView* scheduleMatrix() const;
    ResidualsPanel* residualsPanel() const;
    TeachPanel* teachPanel() const;
    ScheduleViews* scheduleViews() const;
    TourPanel* tourPanel() const;
    void showTeachMode(bool on);
    void showScheduleTab(int which);  // 0 graph, 1 matrix, 2 saved residuals
    void startTour(int tour);
    // Ends the tour (Finish or Esc): the network, strategies, budget and results the user had
    // before it come back as they were, and so do teach mode's dock (open or closed) and the
    // results page on show.
    void endTour();
    bool inTour() const { return before_tour_.has_value(); }
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
    QString missingNetwork() const;
    void locateNetwork(const QString& path);
    QTableView* resultsTable() const;
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
    void buildActions();

    void scheduleNetworkLoad(int delay_ms);
    void loadNetworkNow();
    void schedulePlan();
    void planNow();
    void run(const RunRequest& request);
    void updateRunState(bool busy);
    void updateRunEnabled();  // Run only with a network loaded or on its way
    void runIfAsked();        // a run asked for before the first plan: start it now

    void onNetworkAvailable(quint64 job, const NetworkSummary& s);
    void onPlanAvailable(quint64 job, const RunSummary& plan);
    void onProgress(quint64 job, const ProgressSnapshot& p);
    void onResult(quint64 job, int index, const StrategyResult& r);
    void onRunFinished(quint64 job, const RunSummary& s);
    void onFailed(quint64 job, FailureKind kind, const QString& message);
    void onSweepProgress(quint64 job, int done, int total, const QString& spec);
    void onSweepAvailable(quint64 job, const SweepSummary& s);
    void reportFailures(const std::vector<StrategyResult>& results);

    // Sessions (SessionController): show an opened session's saved results; go without a
    // network until one is located.
    bool applyPendingSession();
    void detachNetwork();
    void showRestoredWithoutNetwork(const QString& path, const QString& name,
                                    const QString& reason);
    void applyTourStep(const TourStep& step);

    void copyCsv();
    void openDialog();
    void addRecentFile(const QString& path);
    void rebuildRecentMenu();
    void about();
    void loadSettings();
    void saveSettings() const;

    RunController* controller_ = nullptr;
    ResultsModel* model_ = nullptr;
    SetupPanel* setup_ = nullptr;
    ResultsArea* results_ = nullptr;
    ScheduleArea* schedule_ = nullptr;
    SessionController* session_ = nullptr;
    ExportDialogs* exports_ = nullptr;
    MessageWidget* message_ = nullptr;
    QLabel* status_label_ = nullptr;
    QProgressBar* progress_ = nullptr;

    QMenu* file_menu_ = nullptr;
    QMenu* recent_menu_ = nullptr;
    QMenu* edit_menu_ = nullptr;
    QMenu* run_menu_ = nullptr;
    QMenu* view_menu_ = nullptr;
    QMenu* help_menu_ = nullptr;
    QAction* open_action_ = nullptr;
    QAction* save_session_action_ = nullptr;
    QAction* open_session_action_ = nullptr;
    QAction* export_network_action_ = nullptr;
    QAction* export_schedule_action_ = nullptr;
    QAction* run_action_ = nullptr;
    QAction* cancel_action_ = nullptr;
    QAction* sweep_action_ = nullptr;
    QAction* export_chart_action_ = nullptr;
    QAction* export_data_action_ = nullptr;
    QAction* copy_action_ = nullptr;
    QStringList recent_files_;

    QTimer network_timer_, plan_timer_;
    bool restore_ = true;
    bool network_ready_ = false;
    bool network_pending_ = false;  // a load is scheduled or in flight
    bool run_when_ready_ = false;
    bool plan_only_waited_ = false;  // Run on a plan-only network waited once for its plan
    NetworkSummary network_;
    QString loading_spec_;
    quint64 network_job_ = 0, plan_job_ = 0, run_job_ = 0, sweep_job_ = 0;
    RunRequest run_request_;
    // Planning asked for while a run is in progress: done when the run ends, never cancelling it.
    // A tour runs in its own session: what the user had is kept here and put back at its end.
    struct UserSession {
        QString network;
        QStringList strategies;  // as planned (budgets included)
        std::optional<uint64_t> budget;
        std::vector<StrategyResult> results;
        std::optional<double> baseline_ms;
        std::optional<Spread> baseline_spread;
        RunRequest measured_with;
        // The view: teach mode's dock (a tour opens it) and the results page on show.
        bool teaching = false;
        int page = 0;
        double link_gbps = TransferRates{}.to_host_gbps;  // Setup's host link (a tour may set it)
    };
    std::optional<UserSession> before_tour_;         // during a tour
    std::optional<UserSession> restore_after_tour_;  // until the restored plan arrives
    bool plan_queued_ = false;
    bool first_plan_ = true;      // the first plan since start-up (its budget is the default)
    bool verify_budget_ = false;  // a budget set to be feasible: raise it while it is not
    void planQueued();
    // The new plan's rows, with the measured figures of the last run kept: as they are for an
    // unchanged spec, greyed and marked stale for the same strategy planned anew.
    std::vector<StrategyResult> keepMeasured(std::vector<StrategyResult> planned) const;
    RunRequest measured_with_;  // what the measured figures on screen were run with
    std::optional<Spread> baseline_spread_;
    int live_index_ = -2;
    std::optional<double> baseline_ms_;
};

}  // namespace rl::ui
