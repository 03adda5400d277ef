#include "ui/session_controller.h"

#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QTimer>

#include "engine/networks/presets.h"
#include "ui/results_model.h"
#include "ui/schedule_trace.h"
#include "ui/session.h"
#include "ui/setup_panel.h"

namespace rl::ui {

SessionController::SessionController(SetupPanel* setup, const ResultsModel* results,
                                     QWidget* dialog_parent)
    : QObject(dialog_parent), setup_(setup), results_(results), dialog_parent_(dialog_parent) {}

SessionController::~SessionController() = default;

QString SessionController::save(const QString& path, const QString& network,
                                std::optional<double> baseline_ms,
                                std::optional<Spread> baseline_spread) const {
    try {
        Session s;
        s.network_spec = network;
        for (const StrategyResult& r : results_->results())
            if (r.trace) {
                s.graph = r.trace->graph;
                break;
            }
        if (!s.graph)
            s.graph =
                std::make_shared<const Graph>(load_network(setup_->networkSpec().toStdString()));
        s.strategies = setup_->strategySpecs();
        s.budget = setup_->budget();
        s.threads = setup_->threads();
        s.cap = setup_->capText();
        s.results = results_->results();
        s.baseline_ms = baseline_ms;
        s.baseline_spread = baseline_spread;
        save_session(path, s);
        return {};
    } catch (const std::exception& e) {
        return QString::fromUtf8(e.what());
    }
}

QString SessionController::open(const QString& path) {
    Session s;
    try {
        s = load_session(path);
    } catch (const std::exception& e) {
        return QString::fromUtf8(e.what());
    }
    pending_ = std::make_shared<Session>(std::move(s));
    detached_.reset();
    missing_network_.clear();
    const Session& p = *pending_;
    if (is_network_file(p.network_spec) && !QFileInfo::exists(p.network_spec)) {
        restoreWithoutNetwork(
            p.network_spec,
            QStringLiteral("was not found: it has been moved, renamed or deleted since the "
                           "session was saved"));
        return {};
    }
    setup_->setNetworkSpec(p.network_spec);
    setup_->setStrategies(p.strategies);
    setup_->setThreads(p.threads);
    setup_->setCap(p.cap);
    setup_->setBudget(p.budget);
    emit status(QStringLiteral("Opening session %1…").arg(path));
    return {};
}

std::shared_ptr<const Session> SessionController::takePending(const NetworkSummary* network) {
    if (!pending_) return nullptr;
    std::shared_ptr<const Session> s = std::move(pending_);
    pending_.reset();
    if (network && s->graph && s->graph->num_nodes() != network->nodes) {
        // A located file that is another network: the saved plans do not fit it. Said after the
        // window has shown the new plan (which dismisses older messages).
        const QString text =
            QStringLiteral(
                "<b>%1</b> is not the network the session was saved with (%2 nodes, "
                "not %3): its strategies were planned anew and the saved results "
                "are not shown.")
                .arg(network->spec.toHtmlEscaped())
                .arg(network->nodes)
                .arg(s->graph->num_nodes());
        QTimer::singleShot(0, this,
                           [this, text] { emit message(MessageWidget::Kind::Warning, text); });
        return nullptr;
    }
    return s;
}

bool SessionController::networkFailed(const QString& spec, const QString& message) {
    if (!pending_) return false;
    restoreWithoutNetwork(spec, QStringLiteral("cannot be loaded: %1").arg(message));
    return true;
}

void SessionController::networkLoaded() {
    missing_network_.clear();  // a network is back (located, or another one chosen)
    detached_.reset();
}

void SessionController::restoreWithoutNetwork(const QString& path, const QString& reason) {
    if (!pending_) return;
    detached_ = pending_;
    missing_network_ = path;
    // Nothing may plan or load over the saved results: no network is ready until one is located.
    emit detached();
    const Session& p = *detached_;
    setup_->setStrategies(p.strategies);
    setup_->setThreads(p.threads);
    setup_->setCap(p.cap);
    setup_->setBudget(p.budget);  // kept pending: applied when a network loads
    const QString name = p.graph ? QString::fromStdString(p.graph->name()) : QString();
    emit restoredWithoutNetwork(path, name, reason);
}

void SessionController::locate(const QString& path) {
    if (detached_) pending_ = detached_;  // shown again once it loads
    detached_.reset();
    missing_network_.clear();
    emit dismissMessage();
    emit locateRequested(path);
}

void SessionController::locateDialog() {
    const QString missing = missing_network_;
    QString dir = QFileInfo(missing).absolutePath();
    while (!dir.isEmpty() && !QFileInfo(dir).isDir() && QFileInfo(dir).absolutePath() != dir)
        dir = QFileInfo(dir).absolutePath();
    const QString found = QFileDialog::getOpenFileName(
        dialog_parent_, QStringLiteral("Locate %1").arg(QFileInfo(missing).fileName()),
        QDir(dir).filePath(QFileInfo(missing).fileName()),
        QStringLiteral("Networks (*.json *.onnx);;All files (*)"));
    if (!found.isEmpty()) locate(found);
}

void SessionController::saveDialog(const QString& network, std::optional<double> baseline_ms,
                                   std::optional<Spread> baseline_spread) {
    const QString path = QFileDialog::getSaveFileName(
        dialog_parent_, QStringLiteral("Save session"), QStringLiteral("session.rematlab.json"),
        QStringLiteral("RematLab session (*.json)"));
    if (path.isEmpty()) return;
    const QString err = save(path, network, baseline_ms, baseline_spread);
    if (err.isEmpty())
        emit status(QStringLiteral("Saved the session to %1").arg(path));
    else
        emit message(MessageWidget::Kind::Error, err.toHtmlEscaped());
}

void SessionController::openDialog() {
    const QString path =
        QFileDialog::getOpenFileName(dialog_parent_, QStringLiteral("Open session"), QString(),
                                     QStringLiteral("RematLab session (*.json);;All files (*)"));
    if (path.isEmpty()) return;
    const QString err = open(path);
    if (!err.isEmpty()) emit message(MessageWidget::Kind::Error, err.toHtmlEscaped());
}

}  // namespace rl::ui
