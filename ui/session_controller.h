#pragma once
// Sessions in the window: save, open, restore, and the network file a session names that is gone.
//
// Opening a session puts its network, strategies and settings into the setup panel; when the
// network has loaded and its plan is ready, the window asks takePending() and, if a session is
// waiting, shows its saved results instead of the plan (nothing is planned or run again). A
// session whose network file is missing (moved, deleted, or no longer loads) still opens:
// detached() asks the window to stop loading and planning and restoredWithoutNetwork() tells what
// to show, drawn from the copy of the network the session holds, with a "Locate…" button;
// locate() loads the file found there and shows the saved results again once it has loaded, if
// it is the same network (same node count), else the window plans anew and says so.
#include <QObject>
#include <QString>
#include <memory>

#include "ui/message_widget.h"
#include "ui/snapshots.h"

QT_BEGIN_NAMESPACE
class QWidget;
QT_END_NAMESPACE

namespace rl::ui {

class SetupPanel;
class ResultsModel;
struct Session;

class SessionController : public QObject {
    Q_OBJECT
  public:
    // Reads and fills `setup`; `results` and `baseline_ms` are what a save writes; dialogs open
    // over `dialog_parent`.
    SessionController(SetupPanel* setup, const ResultsModel* results, QWidget* dialog_parent);
    ~SessionController() override;

    // "" on success, else what went wrong. `network` is the loaded network's spec (a session
    // names the network its results were planned on).
    QString save(const QString& path, const QString& network, std::optional<double> baseline_ms,
                 std::optional<Spread> baseline_spread = {}) const;
    QString open(const QString& path);

    // The session waiting for its network, taken (null when none). With `network` (the network
    // loaded now), a session saved with another network (node count) is dropped and a warning
    // emitted.
    std::shared_ptr<const Session> takePending(const NetworkSummary* network);
    bool hasPending() const { return bool(pending_); }
    // The session's network failed to load (`spec`, `message`): restore the rest without it.
    // False when no session is waiting (an ordinary load failure).
    bool networkFailed(const QString& spec, const QString& message);
    // A network loaded: whatever was missing is no longer.
    void networkLoaded();

    // The path of a session's missing network file ("" when none).
    QString missingNetwork() const { return missing_network_; }
    // Loads the file found at `path` in place of the missing one.
    void locate(const QString& path);

    void saveDialog(const QString& network, std::optional<double> baseline_ms,
                    std::optional<Spread> baseline_spread = {});
    void openDialog();
    void locateDialog();

  signals:
    // Stop loading and planning: no network is ready until one is located.
    void detached();
    // The session is restored without its network file `path` (why: `reason`), its results
    // drawn from the copy of the network it holds (`name`).
    void restoredWithoutNetwork(const QString& path, const QString& name, const QString& reason);
    // Load the file found for the missing network.
    void locateRequested(const QString& path);
    void message(MessageWidget::Kind kind, const QString& html);
    void dismissMessage();
    void status(const QString& text);

  private:
    void restoreWithoutNetwork(const QString& path, const QString& reason);

    SetupPanel* setup_;
    const ResultsModel* results_;
    QWidget* dialog_parent_;
    std::shared_ptr<Session> pending_;   // opened, waiting for its network to load
    std::shared_ptr<Session> detached_;  // opened without its network file
    QString missing_network_;
};

}  // namespace rl::ui
