#pragma once
// Runs the engine off the GUI thread. One worker thread executes jobs in order; each job has an
// id, and the newest job of its lane wins (hotspot's JobTracker): submitting a job cancels the
// one in flight (through std::atomic, checked between instructions), queued jobs that are no
// longer the newest are skipped, and results of stale jobs are dropped before they reach the
// window. Two lanes: network loads, and plan/run jobs — so loading a network does not make the
// plan that follows it stale.
//
// The worker publishes immutable snapshots through queued typed signals: networkAvailable,
// planAvailable (plan + simulate only: fast, what the budget slider drives while it moves),
// progress (at most ~30 per second, never one per instruction), resultAvailable (one strategy
// done), runFinished, and failed (a bad network, a cancelled run, …).
#include <QObject>
#include <QPointer>
#include <QThread>
#include <atomic>
#include <cstdint>
#include <memory>

#include "ui/snapshots.h"
#include "ui/sweeps.h"

namespace rl::ui {

class RunWorker;

enum class FailureKind { Network, Run, Cancelled };

class RunController : public QObject {
    Q_OBJECT
  public:
    explicit RunController(QObject* parent = nullptr);
    ~RunController() override;

    quint64 loadNetwork(const QString& spec);
    // Plan and simulate only (nothing allocated): the predicted figures and timelines.
    quint64 plan(const RunRequest& request);
    // Plan, simulate, execute and check gradients, strategy by strategy.
    quint64 run(const RunRequest& request);
    // Sweeps each instance's memory / recompute curve and the optimal frontier (ui/sweeps.h):
    // sweepProgress per point, then sweepAvailable. A compute job like the others: a newer plan
    // or run replaces it.
    quint64 sweep(const SweepRequest& request);
    // Stops the plan/run job in flight (between instructions) and skips queued ones.
    void cancel();

    bool busy() const { return running_ != 0; }
    quint64 runningJob() const { return running_; }

  signals:
    void networkAvailable(quint64 job, const rl::ui::NetworkSummary& summary);
    void planAvailable(quint64 job, const rl::ui::RunSummary& plan);
    void progress(quint64 job, const rl::ui::ProgressSnapshot& progress);
    void resultAvailable(quint64 job, int index, const rl::ui::StrategyResult& result);
    void runFinished(quint64 job, const rl::ui::RunSummary& summary);
    void failed(quint64 job, rl::ui::FailureKind kind, const QString& message);
    void sweepProgress(quint64 job, int done, int total, const QString& spec);
    void sweepAvailable(quint64 job, const rl::ui::SweepSummary& summary);
    void busyChanged(bool busy);

  private:
    friend class RunWorker;
    quint64 submitCompute();
    void setRunning(quint64 job);

    struct Shared {
        std::atomic<quint64> next_id{1};
        std::atomic<quint64> latest_network{0}, latest_compute{0}, cancelled_up_to{0};
        std::atomic<bool> stop{false};
    };
    std::shared_ptr<Shared> shared_;
    QThread thread_;
    RunWorker* worker_ = nullptr;
    quint64 running_ = 0;  // the run job the window waits for (0 = idle)
};

}  // namespace rl::ui

Q_DECLARE_METATYPE(rl::ui::FailureKind)
