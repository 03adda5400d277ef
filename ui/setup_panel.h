#pragma once
// The setup dock's contents: the network (a preset with its parameters, or a file), the
// strategies (a box per instance, each with its parameter form), the memory budget and the run
// options (device, threads, memory cap, Run / Cancel).
//
// It plans and runs nothing. It says what changed — networkEdited when the network chosen
// changed, planInputsChanged when the strategies, their parameters, the budget or the threads did
// — and on Run it emits the run request built from exactly what it shows. The window tells it
// about the network (loading, loaded, failed, missing), which gives the budget slider its range.
#include <QStringList>
#include <QWidget>
#include <memory>
#include <optional>
#include <vector>

#include "engine/params.h"
#include "ui/snapshots.h"

QT_BEGIN_NAMESPACE
class QCheckBox;
class QComboBox;
class QGroupBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QSettings;
class QSlider;
class QDoubleSpinBox;
class QSpinBox;
class QStackedWidget;
class QVBoxLayout;
QT_END_NAMESPACE

namespace rl {
class Strategy;
}

namespace rl::ui {

class ParamForm;

// A network spec that names a file (a path, or a .json / .onnx name) rather than a preset.
bool is_network_file(const QString& spec);

class SetupPanel : public QWidget {
    Q_OBJECT
  public:
    static constexpr int kSliderSteps = 1000;

    explicit SetupPanel(QWidget* parent = nullptr);
    ~SetupPanel() override;

    // ---- the network
    // The network as chosen: a preset spec ("mlp:depth=8") or a file path.
    QString networkSpec() const;
    // Shows a preset spec in the preset box and its form, or takes a path (or a spec no preset
    // matches, for the loader to explain) as a file; then emits networkEdited(0).
    void setNetworkSpec(const QString& spec);
    // What the window says about the network: it is about to load (the budget has no range until
    // it has), it is loading, it loaded (the summary and the budget's range), it failed to load,
    // or a session's file is missing (`path` is kept as the spec; `name`: the saved copy's).
    void unsetNetwork();
    void showLoading(const QString& spec);
    void setNetwork(const NetworkSummary& summary);
    void showNotLoaded();
    void showMissingNetwork(const QString& path, const QString& name);
    // Whether Run can start: a network is loaded or on its way (a run waits for it). False after a
    // load failed or a session's file is missing, where the panel offers Reload instead.
    void setRunnable(bool runnable);
    bool runEnabled() const;

    // ---- strategies and budget
    // Ticks exactly these strategies, with their parameters; a `budget=` sets the slider. A
    // strategy named twice or more gets a box per instance. Bad or unknown names are reported
    // through strategyError and skipped.
    void setStrategies(const QStringList& specs);
    // Adds a box for another instance of `name` (what its "+" button does); returns its index
    // among the boxes of that strategy, or -1 for an unknown name.
    int duplicateStrategy(const QString& name);
    int strategyBoxCount(const QString& name) const;
    QStringList strategySpecs() const;  // the ticked strategies as they will be planned
    QStringList sweepSpecs() const;     // the ticked instances as a sweep takes them: no budget
    QString frontierSpec() const;       // the ticked `optimal` instance without budget, or ""
    // The budget the slider shows, rounded to print as it parses; nullopt when the budget box is
    // unticked or no network has loaded.
    std::optional<uint64_t> budget() const;
    // Ticks the budget box and moves the slider to `bytes` (kept until a network has loaded);
    // nullopt unticks it.
    // The slider lands on the smallest budget it can show that is at least `bytes` (or its top).
    void setBudget(std::optional<uint64_t> bytes);
    // The budget setBudget(bytes) would set when it is at least `bytes`; nullopt before a
    // network has loaded or when `bytes` is above the slider's top (plain backprop's peak).
    std::optional<uint64_t> budgetFor(uint64_t bytes) const;
    // Moves the slider one step up; false at the top or with the budget box unticked.
    bool raiseBudgetOneStep();
    // Whether the budget is still the slider's default: nobody set or moved it.
    bool budgetIsDefault() const { return !budget_chosen_; }

    // ---- run options
    void setThreads(int threads);
    int threads() const;
    // Timed rounds of a run after its warm-up round (RunRequest::repeats).
    void setRepeats(int repeats);
    int repeats() const;
    // The host link offloads cross, GB/s (RunRequest::link_gbps).
    void setLinkGbps(double gbps);
    double linkGbps() const;
    void setCap(const QString& text);
    QString capText() const;
    // What a run of the ticked strategies would be given. Throws rl::Error for a memory cap that
    // does not parse.
    RunRequest request() const;
    // Emits runRequested with request(), or invalidInput with what is wrong.
    void requestRun();
    // Run enabled, Cancel disabled while idle; the other way round while busy.
    void setBusy(bool busy);

    // The budget and the run options (the window keeps the network and the strategies: they
    // load through setNetworkSpec and setStrategies).
    void saveSettings(QSettings& settings) const;
    void loadSettings(QSettings& settings);

  signals:
    void networkEdited(int delay_ms);  // load the network after this delay (typing coalesces)
    void planInputsChanged();
    void openRequested();    // the "Open…" button
    void reloadRequested();  // the "Reload" button (shown after a network failed to load)
    void runRequested(const RunRequest& request);
    void invalidInput(const QString& message);
    void cancelRequested();
    void strategyError(const QString& message);  // from setStrategies

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
    StrategyBox* addStrategyBox(const Strategy& s, bool copy);
    void removeStrategyBox(StrategyBox* box);
    std::optional<uint64_t> sliderBytes() const;
    std::optional<uint64_t> bytesAtStep(int step) const;
    int stepAtLeast(uint64_t bytes) const;
    void updateBudgetLabel();
    void updateSummary();
    // Shows the opened network file (spec) in the network box, or a preset when spec is empty:
    // a file gets an item of its own after the presets, selected, with the preset forms hidden,
    // so the box never shows a preset's parameters for a network that is not that preset.
    void showFile(const QString& spec);
    int fileItem() const;  // the index of that item, -1 when there is none

    QComboBox* preset_ = nullptr;
    QStackedWidget* preset_forms_ = nullptr;
    std::vector<ParamForm*> preset_param_forms_;
    QLabel* summary_ = nullptr;
    QPushButton* open_button_ = nullptr;
    QPushButton* reload_button_ = nullptr;  // shown while the network failed to load
    QString file_spec_;                     // the opened network file, "" = a preset

    std::vector<std::unique_ptr<StrategyBox>> strategy_boxes_;
    QVBoxLayout* strategy_layout_ = nullptr;
    QGroupBox* budget_box_ = nullptr;
    QSlider* budget_slider_ = nullptr;
    QLabel* budget_label_ = nullptr;

    QComboBox* device_ = nullptr;
    QSpinBox* threads_ = nullptr;
    QSpinBox* repeats_ = nullptr;
    QDoubleSpinBox* link_ = nullptr;  // the host link, GB/s (offload)
    QLineEdit* cap_ = nullptr;
    QPushButton* run_button_ = nullptr;
    QPushButton* cancel_button_ = nullptr;

    bool busy_ = false;
    bool runnable_ = true;
    bool suppress_ = false;  // while the panel sets its own fields
    bool network_ready_ = false;
    NetworkSummary network_;
    std::optional<uint64_t> pending_budget_;
    bool budget_chosen_ = false;
};

}  // namespace rl::ui
