#include "ui/run_controller.h"

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <tuple>

#include "engine/errors.h"
#include "engine/networks/presets.h"
#include "ui/evaluation.h"

namespace rl::ui {

namespace {

// Forwards the executor's per-instruction callbacks as batches, at most ~30 per second.
class ThrottledObserver : public ExecutionObserver {
  public:
    using Emit = std::function<void(ProgressSnapshot&&)>;
    explicit ThrottledObserver(Emit sink) : emit_(std::move(sink)) {}

    void begin(int index, int count, const QString& label, long instruction_count, int round = 0,
               int rounds = 0) {
        snap_ = ProgressSnapshot{};
        snap_.strategy_index = index;
        snap_.strategy_count = count;
        snap_.round = round;
        snap_.rounds = rounds;
        snap_.label = label;
        snap_.instruction_count = instruction_count;
        last_ = {};
        flush();
    }
    void on_instruction(long index, uint64_t live_bytes, double elapsed_ms) override {
        snap_.instruction = index + 1;
        snap_.live_bytes = live_bytes;
        snap_.elapsed_ms = elapsed_ms;
        snap_.new_points.push_back({elapsed_ms, static_cast<double>(live_bytes)});
        snap_.new_instructions.push_back(static_cast<int32_t>(index));
        const auto now = std::chrono::steady_clock::now();
        if (now - last_ >= std::chrono::milliseconds(33)) flush();
    }
    void flush() {
        last_ = std::chrono::steady_clock::now();
        ProgressSnapshot out = snap_;
        snap_.new_points.clear();
        snap_.new_instructions.clear();
        emit_(std::move(out));
    }

  private:
    Emit emit_;
    ProgressSnapshot snap_;
    std::chrono::steady_clock::time_point last_{};
};

}  // namespace

// Lives on the worker thread; everything it touches is its own, plus the shared atomics.
class RunWorker : public QObject {
    Q_OBJECT
  public:
    explicit RunWorker(std::shared_ptr<RunController::Shared> shared)
        : shared_(std::move(shared)) {}

    void loadNetwork(quint64 job, const QString& spec) {
        if (job != shared_->latest_network.load()) return;  // a newer load is queued
        try {
            const auto& g = graph(spec);
            emit networkAvailable(job, summarize(*g, spec));
        } catch (const std::exception& e) {
            emit failed(job, FailureKind::Network, QString::fromStdString(e.what()));
        }
    }

    void compute(quint64 job, const RunRequest& request, bool execute) {
        shared_->stop.store(false);
        if (stale(job)) return;
        const auto t0 = std::chrono::steady_clock::now();
        try {
            const auto& g = graph(request.network);
            Evaluator& ev = evaluator(request, execute);
            RunSummary summary;
            ThrottledObserver* obs = observer_.get();
            const int count = static_cast<int>(request.strategies.size());
            if (execute) {
                // A warm-up round and request.repeats timed rounds, each running every strategy
                // once in turn (Evaluator::compare); the live chart follows each step.
                obs_job_ = job;
                // Cancel keeps what was measured: each strategy's completed timed repeats are
                // published (summary.cancelled); a newer job replacing this one drops them.
                summary = measure_all(
                    ev, *g, request.strategies, g,
                    [&](int round, size_t i) {
                        if (stale(job)) throw Cancelled();
                        if (round == kPlanningRound) return;  // the bar follows the steps only
                        const int index = static_cast<int>(i) < count ? static_cast<int>(i) : -1;
                        const QString spec = index >= 0 ? request.strategies[index]
                                                        : QStringLiteral("none (baseline)");
                        obs->flush();
                        obs->begin(index, count,
                                   round == 0 ? QStringLiteral("%1 · warm-up").arg(spec)
                                              : QStringLiteral("%1 · round %2/%3")
                                                    .arg(spec)
                                                    .arg(round)
                                                    .arg(request.repeats),
                                   0, round, request.repeats);
                    },
                    /*keep_cancelled=*/true);
                obs->flush();
                for (int i = 0; i < count; ++i)
                    emit resultAvailable(job, i, summary.results[static_cast<size_t>(i)]);
            } else {
                for (int i = 0; i < count; ++i) {
                    if (stale(job)) throw Cancelled();
                    summary.results.push_back(evaluate_one(ev, *g, request.strategies[i], g));
                }
            }
            summary.wall_ms =
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                    .count();
            // Cancelled by the user (not replaced by a newer job): what was measured is news.
            if (execute && summary.cancelled && job == shared_->latest_compute.load()) {
                emit runFinished(job, summary);
                return;
            }
            if (stale(job)) throw Cancelled();
            if (execute)
                emit runFinished(job, summary);
            else
                emit planAvailable(job, summary);
        } catch (const Cancelled&) {
            emit failed(job, FailureKind::Cancelled, QStringLiteral("run cancelled"));
        } catch (const std::bad_alloc&) {
            emit failed(job, FailureKind::Run,
                        QStringLiteral("out of memory; try a smaller network or a strategy with "
                                       "a lower peak"));
        } catch (const std::exception& e) {
            emit failed(job, FailureKind::Run, QString::fromStdString(e.what()));
        }
    }

    void sweep(quint64 job, const SweepRequest& request) {
        shared_->stop.store(false);
        if (stale(job)) return;
        try {
            const auto& g = graph(request.network);
            RunRequest r;
            r.threads = request.threads;
            r.cap = request.cap;
            r.device = request.device;
            r.link_gbps = request.link_gbps;
            r.repeats = 1;  // a sweep's measured points: one timed run each after the warm-up
            // Predict with the cost model of the figures on screen: the profiled one of the last
            // run when asked (or when executing), else the analytic one of the plans.
            const bool exec = request.execute || request.use_run_costs;
            Evaluator& ev = evaluator(r, exec);
            obs_job_ = 0;  // per-instruction progress is no news for a sweep: dropped
            SweepSummary summary = run_sweeps(
                *g, ev, request,
                [&](int done, int total, const QString& spec) {
                    if (stale(job)) throw Cancelled();
                    emit sweepProgress(job, done, total, spec);
                },
                &shared_->stop);
            if (stale(job)) throw Cancelled();
            emit sweepAvailable(job, summary);
        } catch (const Cancelled&) {
            emit failed(job, FailureKind::Cancelled, QStringLiteral("sweep cancelled"));
        } catch (const std::bad_alloc&) {
            emit failed(job, FailureKind::Run, QStringLiteral("out of memory during the sweep"));
        } catch (const std::exception& e) {
            emit failed(job, FailureKind::Run, QString::fromStdString(e.what()));
        }
    }

  signals:
    void sweepProgress(quint64 job, int done, int total, const QString& spec);
    void sweepAvailable(quint64 job, const rl::ui::SweepSummary& summary);
    void networkAvailable(quint64 job, const rl::ui::NetworkSummary& summary);
    void planAvailable(quint64 job, const rl::ui::RunSummary& plan);
    void progress(quint64 job, const rl::ui::ProgressSnapshot& progress);
    void resultAvailable(quint64 job, int index, const rl::ui::StrategyResult& result);
    void runFinished(quint64 job, const rl::ui::RunSummary& summary);
    void failed(quint64 job, rl::ui::FailureKind kind, const QString& message);

  private:
    bool stale(quint64 job) const {
        return job != shared_->latest_compute.load() || job <= shared_->cancelled_up_to.load();
    }

    const std::shared_ptr<const Graph>& graph(const QString& spec) {
        if (!graph_ || graph_spec_ != spec) {
            evaluators_.clear();  // they refer to the old graph
            graph_.reset();
            graph_ = std::make_shared<const Graph>(load_network(spec.toStdString()));
            graph_spec_ = spec;
        }
        return graph_;
    }

    // One evaluator per (threads, cap, execute) on the current graph: it keeps the profiled cost
    // model and none's reference gradients between runs.
    Evaluator& evaluator(const RunRequest& request, bool execute) {
        const auto key =
            std::make_tuple(request.threads, request.cap, execute, request.device.toStdString(),
                            request.repeats, request.link_gbps);
        auto it = evaluators_.find(key);
        if (it == evaluators_.end()) {
            EvaluateOptions eo;
            eo.threads = request.threads;
            eo.cap = request.cap;
            eo.device = request.device.toStdString();
            eo.execute = execute;
            eo.repeat = request.repeats;
            eo.cancel = &shared_->stop;
            eo.keep_partial_rounds = true;  // Cancel keeps each strategy's completed repeats
            eo.link = link_of(request.link_gbps);
            if (!observer_)
                observer_ = std::make_unique<ThrottledObserver>(
                    [this](ProgressSnapshot&& p) { emit progress(obs_job_, p); });
            eo.observer = observer_.get();
            it = evaluators_
                     .emplace(key,
                              std::make_unique<Evaluator>(*graph_, graph_spec_.toStdString(), eo))
                     .first;
        }
        return *it->second;
    }

    std::shared_ptr<RunController::Shared> shared_;
    std::shared_ptr<const Graph> graph_;
    QString graph_spec_;
    std::map<std::tuple<int, uint64_t, bool, std::string, int, double>, std::unique_ptr<Evaluator>>
        evaluators_;
    std::unique_ptr<ThrottledObserver> observer_;
    quint64 obs_job_ = 0;
};

RunController::RunController(QObject* parent)
    : QObject(parent), shared_(std::make_shared<Shared>()) {
    qRegisterMetaType<NetworkSummary>();
    qRegisterMetaType<StrategyResult>();
    qRegisterMetaType<ProgressSnapshot>();
    qRegisterMetaType<RunSummary>();
    qRegisterMetaType<FailureKind>();
    qRegisterMetaType<SweepSummary>();
    thread_.setObjectName(QStringLiteral("rematlab-run-worker"));
    worker_ = new RunWorker(shared_);
    worker_->moveToThread(&thread_);
    connect(&thread_, &QThread::finished, worker_, &QObject::deleteLater);

    // Queued delivery onto this (GUI) thread; a result of a job that is no longer the newest of
    // its lane is dropped here.
    auto current = [s = shared_](quint64 job) { return job == s->latest_compute.load(); };
    connect(worker_, &RunWorker::networkAvailable, this,
            [this](quint64 job, const NetworkSummary& n) {
                if (job == shared_->latest_network.load()) emit networkAvailable(job, n);
            });
    connect(worker_, &RunWorker::planAvailable, this,
            [this, current](quint64 job, const RunSummary& p) {
                if (current(job)) {
                    setRunning(0);
                    emit planAvailable(job, p);
                }
            });
    connect(worker_, &RunWorker::progress, this,
            [this, current](quint64 job, const ProgressSnapshot& p) {
                if (current(job) && job == running_) emit progress(job, p);
            });
    connect(worker_, &RunWorker::resultAvailable, this,
            [this, current](quint64 job, int index, const StrategyResult& r) {
                if (current(job) && job == running_) emit resultAvailable(job, index, r);
            });
    connect(worker_, &RunWorker::sweepProgress, this,
            [this, current](quint64 job, int done, int total, const QString& spec) {
                if (current(job) && job == running_) emit sweepProgress(job, done, total, spec);
            });
    connect(worker_, &RunWorker::sweepAvailable, this,
            [this, current](quint64 job, const SweepSummary& s) {
                if (!current(job)) return;
                setRunning(0);
                emit sweepAvailable(job, s);
            });
    connect(worker_, &RunWorker::runFinished, this,
            [this, current](quint64 job, const RunSummary& s) {
                if (!current(job)) return;
                setRunning(0);
                emit runFinished(job, s);
            });
    connect(worker_, &RunWorker::failed, this,
            [this, current](quint64 job, FailureKind kind, const QString& message) {
                if (kind == FailureKind::Network) {
                    if (job == shared_->latest_network.load()) emit failed(job, kind, message);
                    return;
                }
                // A job cancelled because a newer one replaced it is not news.
                if (!current(job) && kind == FailureKind::Cancelled) return;
                if (!current(job)) return;
                setRunning(0);
                emit failed(job, kind, message);
            });
    thread_.start();
}

RunController::~RunController() {
    shared_->cancelled_up_to.store(shared_->next_id.load());
    shared_->stop.store(true);
    thread_.quit();
    thread_.wait();
}

quint64 RunController::loadNetwork(const QString& spec) {
    const quint64 id = shared_->next_id.fetch_add(1);
    shared_->latest_network.store(id);
    QMetaObject::invokeMethod(
        worker_, [w = worker_, id, spec] { w->loadNetwork(id, spec); }, Qt::QueuedConnection);
    return id;
}

quint64 RunController::submitCompute() {
    const quint64 id = shared_->next_id.fetch_add(1);
    // Order matters: publish the new id before raising `stop`, so a job that clears `stop` as it
    // starts then sees that it is stale.
    shared_->latest_compute.store(id);
    shared_->stop.store(true);
    return id;
}

quint64 RunController::plan(const RunRequest& request) {
    const quint64 id = submitCompute();
    setRunning(0);
    QMetaObject::invokeMethod(
        worker_, [w = worker_, id, request] { w->compute(id, request, false); },
        Qt::QueuedConnection);
    return id;
}

quint64 RunController::run(const RunRequest& request) {
    const quint64 id = submitCompute();
    setRunning(id);
    QMetaObject::invokeMethod(
        worker_, [w = worker_, id, request] { w->compute(id, request, true); },
        Qt::QueuedConnection);
    return id;
}

quint64 RunController::sweep(const SweepRequest& request) {
    const quint64 id = submitCompute();
    setRunning(id);
    QMetaObject::invokeMethod(
        worker_, [w = worker_, id, request] { w->sweep(id, request); }, Qt::QueuedConnection);
    return id;
}

void RunController::cancel() {
    shared_->cancelled_up_to.store(shared_->latest_compute.load());
    shared_->stop.store(true);
}

void RunController::setRunning(quint64 job) {
    const bool was = running_ != 0;
    running_ = job;
    if (was != (job != 0)) emit busyChanged(job != 0);
}

}  // namespace rl::ui

#include "run_controller.moc"
