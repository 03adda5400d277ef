#include "ui/setup_panel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSettings>
#include <QSlider>
#include <QSpinBox>
#include <QStackedWidget>
#include <QThread>
#include <QToolButton>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "engine/backend.h"
#include "engine/networks/presets.h"
#include "engine/units.h"
#include "strategies/strategy.h"
#include "ui/evaluation.h"
#include "ui/palette.h"
#include "ui/param_form.h"
#include "ui/qt_text.h"

namespace rl::ui {

namespace {

// The default network and strategies: activations dominate parameters, so checkpointing shows.
const char* const kDefaultPreset = "mlp";
const std::vector<std::pair<std::string, std::string>> kDefaultPresetArgs = {
    {"depth", "32"}, {"width", "256"}, {"batch", "1024"}};
const QStringList kDefaultStrategies = {QStringLiteral("none"), QStringLiteral("sqrt-n"),
                                        QStringLiteral("periodic")};
constexpr int kSliderSteps = SetupPanel::kSliderSteps;

QString flops_text(double f) {
    const char* units[] = {"", "K", "M", "G", "T", "P"};
    int i = 0;
    while (f >= 1000 && i < 5) f /= 1000, ++i;
    return QStringLiteral("%1 %2FLOP").arg(f, 0, 'f', f < 10 ? 2 : 1).arg(QLatin1String(units[i]));
}

QString budget_arg(uint64_t bytes) {
    return size_arg_is_exact(bytes) ? size_arg(bytes) : QString::number(bytes);
}

}  // namespace

bool is_network_file(const QString& spec) {
    return spec.contains(QLatin1Char('/')) || spec.endsWith(QLatin1String(".json")) ||
           spec.endsWith(QLatin1String(".onnx"));
}

SetupPanel::SetupPanel(QWidget* parent) : QWidget(parent) {
    auto* column = new QVBoxLayout(this);
    column->setContentsMargins(8, 8, 8, 8);
    column->setSpacing(10);
    column->addWidget(buildNetworkPanel());
    column->addWidget(buildStrategyPanel());
    column->addWidget(buildRunPanel());
    column->addStretch(1);
    setBusy(false);
}

SetupPanel::~SetupPanel() = default;

QWidget* SetupPanel::buildNetworkPanel() {
    auto* group = new QGroupBox(QStringLiteral("Network"));
    auto* v = new QVBoxLayout(group);
    auto* row = new QHBoxLayout;
    preset_ = new QComboBox;
    preset_->setToolTip(QStringLiteral("A built-in network; its parameters are below"));
    preset_forms_ = new QStackedWidget;
    for (const PresetInfo& p : presets()) {
        preset_->addItem(to_qstring(p.name), to_qstring(p.name));
        preset_->setItemData(preset_->count() - 1, to_qstring(p.about), Qt::ToolTipRole);
        auto* form = new ParamForm(p.schema);
        preset_forms_->addWidget(form);
        preset_param_forms_.push_back(form);
        connect(form, &ParamForm::changed, this, [this] {
            if (!suppress_) {
                showFile({});
                emit networkEdited(300);
            }
        });
    }
    open_button_ = new QPushButton(QStringLiteral("Open…"));
    open_button_->setToolTip(
        QStringLiteral("Open a network file in RematLab's JSON format (Ctrl+O)"));
    reload_button_ = new QPushButton(QStringLiteral("Reload"));
    reload_button_->setObjectName(QStringLiteral("reloadNetwork"));
    reload_button_->setToolTip(
        QStringLiteral("Load the network again (after fixing the file that failed to load)"));
    reload_button_->setVisible(false);
    row->addWidget(preset_, 1);
    row->addWidget(open_button_);
    row->addWidget(reload_button_);
    v->addLayout(row);
    v->addWidget(preset_forms_);
    summary_ = new QLabel(QStringLiteral("Loading…"));
    summary_->setWordWrap(true);
    summary_->setTextFormat(Qt::RichText);
    summary_->setToolTip(QStringLiteral("Size of the loaded network"));
    summary_->setStyleSheet(QStringLiteral("color: #444;"));
    v->addWidget(summary_);
    // The stack takes the height of the current form only, not of the tallest one.
    connect(preset_forms_, &QStackedWidget::currentChanged, this, [this](int i) {
        for (int k = 0; k < preset_forms_->count(); ++k)
            preset_forms_->widget(k)->setSizePolicy(
                QSizePolicy::Preferred, k == i ? QSizePolicy::Preferred : QSizePolicy::Ignored);
        preset_forms_->adjustSize();
    });
    connect(preset_, &QComboBox::currentIndexChanged, this, [this](int i) {
        if (i >= 0 && i == fileItem()) return;  // the opened file, shown by showFile()
        if (i >= 0 && i < preset_forms_->count()) preset_forms_->setCurrentIndex(i);
        if (!suppress_) {
            showFile({});
            emit networkEdited(0);
        }
    });
    connect(open_button_, &QPushButton::clicked, this, &SetupPanel::openRequested);
    connect(reload_button_, &QPushButton::clicked, this, &SetupPanel::reloadRequested);
    // Defaults.
    suppress_ = true;
    const int def = preset_->findData(QString::fromLatin1(kDefaultPreset));
    if (def >= 0) {
        preset_->setCurrentIndex(def);
        preset_forms_->setCurrentIndex(def);
        preset_param_forms_[static_cast<size_t>(def)]->setArgs(kDefaultPresetArgs);
    }
    emit preset_forms_->currentChanged(preset_forms_->currentIndex());
    suppress_ = false;
    return group;
}

QWidget* SetupPanel::buildStrategyPanel() {
    auto* group = new QGroupBox(QStringLiteral("Strategies"));
    auto* v = new QVBoxLayout(group);
    v->setSpacing(4);
    strategy_layout_ = v;
    for (const Strategy* s : strategies()) addStrategyBox(*s, false);
    for (const auto& sb : strategy_boxes_)
        sb->check->setChecked(kDefaultStrategies.contains(sb->name));

    budget_box_ = new QGroupBox(QStringLiteral("Memory budget"));
    budget_box_->setCheckable(true);
    budget_box_->setChecked(true);
    budget_box_->setToolTip(QStringLiteral(
        "The byte budget given to every budgeted strategy; the plan follows the slider as it "
        "moves. Untick to plan budgeted strategies without a budget."));
    auto* bv = new QVBoxLayout(budget_box_);
    budget_slider_ = new QSlider(Qt::Horizontal);
    budget_slider_->setRange(0, kSliderSteps);
    budget_slider_->setValue(kSliderSteps / 2);
    budget_slider_->setToolTip(QStringLiteral(
        "Budget from the always-live bytes (parameters and inputs) up to plain backprop's peak"));
    budget_label_ = new QLabel;
    budget_label_->setToolTip(budget_slider_->toolTip());
    bv->addWidget(budget_slider_);
    bv->addWidget(budget_label_);
    v->addWidget(budget_box_);
    connect(budget_slider_, &QSlider::actionTriggered, this, [this] { budget_chosen_ = true; });
    connect(budget_slider_, &QSlider::valueChanged, this, [this] {
        updateBudgetLabel();
        if (!suppress_) emit planInputsChanged();
    });
    connect(budget_box_, &QGroupBox::toggled, this, [this] {
        if (!suppress_) emit planInputsChanged();
    });
    updateBudgetLabel();
    return group;
}

Spec SetupPanel::StrategyBox::spec() const {
    return Spec{name.toStdString(), form ? form->args() : decltype(Spec::args){}};
}

SetupPanel::StrategyBox* SetupPanel::addStrategyBox(const Strategy& s, bool copy) {
    auto owned = std::make_unique<StrategyBox>();
    StrategyBox* sb = owned.get();
    sb->name = to_qstring(s.name());
    sb->budgeted = takes_budget(s);
    sb->copy = copy;
    sb->frame = new QWidget;
    const int n = strategyBoxCount(sb->name);
    sb->frame->setObjectName(QStringLiteral("strategy:") + sb->name +
                             (copy ? QStringLiteral("#%1").arg(n + 1) : QString()));
    auto* col = new QVBoxLayout(sb->frame);
    col->setContentsMargins(0, 0, 0, 0);
    col->setSpacing(2);
    auto* head = new QHBoxLayout;
    head->setContentsMargins(0, 0, 0, 0);
    sb->check =
        new QCheckBox(sb->name + (sb->budgeted ? QStringLiteral("  · budgeted") : QString()));
    sb->check->setToolTip(
        to_qstring(s.about()) +
        (sb->budgeted ? QStringLiteral("\nIts budget comes from the budget slider.") : QString()));
    head->addWidget(sb->check, 1);
    auto* add = new QToolButton;
    add->setText(QStringLiteral("+"));
    add->setAutoRaise(true);
    add->setObjectName(QStringLiteral("duplicate:") + sb->name);
    add->setToolTip(QStringLiteral("Add another %1 with parameters of its own, to compare "
                                   "instances side by side")
                        .arg(sb->name));
    head->addWidget(add);
    connect(add, &QToolButton::clicked, this, [this, name = sb->name] {
        duplicateStrategy(name);
        emit planInputsChanged();
    });
    if (copy) {
        auto* remove = new QToolButton;
        remove->setText(QStringLiteral("×"));
        remove->setAutoRaise(true);
        remove->setObjectName(QStringLiteral("remove:") + sb->name);
        remove->setToolTip(QStringLiteral("Remove this instance"));
        head->addWidget(remove);
        connect(remove, &QToolButton::clicked, this, [this, sb] {
            removeStrategyBox(sb);
            emit planInputsChanged();
        });
    }
    col->addLayout(head);
    sb->form = new ParamForm(s.schema(), {"budget"});
    if (sb->form->empty()) {
        delete sb->form;
        sb->form = nullptr;
    } else {
        // Indented under its check box; unticked strategies are one row, nothing below.
        sb->form->setContentsMargins(22, 0, 0, 2);
        col->addWidget(sb->form);
        sb->form->setVisible(false);
        connect(sb->form, &ParamForm::changed, this, &SetupPanel::planInputsChanged);
    }
    connect(sb->check, &QCheckBox::toggled, this, [this, form = sb->form](bool on) {
        if (form) form->setVisible(on);
        if (!suppress_) emit planInputsChanged();
    });
    // After the last instance of the same strategy, in the panel and in the list (which is the
    // order strategies are planned, run and listed in).
    auto after = strategy_boxes_.end();
    for (auto it = strategy_boxes_.begin(); it != strategy_boxes_.end(); ++it)
        if ((*it)->name == sb->name) after = it + 1;
    const int at = after == strategy_boxes_.end() ? strategy_layout_->count()
                                                  : strategy_layout_->indexOf((*after)->frame);
    strategy_layout_->insertWidget(at, sb->frame);
    strategy_boxes_.insert(after, std::move(owned));
    return sb;
}

void SetupPanel::removeStrategyBox(StrategyBox* box) {
    auto it = std::find_if(strategy_boxes_.begin(), strategy_boxes_.end(),
                           [box](const auto& p) { return p.get() == box; });
    if (it == strategy_boxes_.end() || !box->copy) return;
    box->frame->hide();
    box->frame->deleteLater();
    strategy_boxes_.erase(it);
}

int SetupPanel::duplicateStrategy(const QString& name) {
    const Strategy* found = nullptr;
    for (const Strategy* s : strategies())
        if (to_qstring(s->name()) == name) found = s;
    if (!found) return -1;
    const int index = strategyBoxCount(name);
    StrategyBox* sb = addStrategyBox(*found, true);
    // A copy starts as the instance it copies, ticked, ready to be changed.
    const StrategyBox* source = nullptr;
    for (const auto& other : strategy_boxes_)
        if (other->name == name && other.get() != sb && (!source || other->check->isChecked()))
            source = other.get();
    const bool was = suppress_;
    suppress_ = true;
    if (source && source->form && sb->form) sb->form->setArgs(source->form->args());
    sb->check->setChecked(true);
    suppress_ = was;
    return index;
}

int SetupPanel::strategyBoxCount(const QString& name) const {
    return static_cast<int>(std::count_if(strategy_boxes_.begin(), strategy_boxes_.end(),
                                          [&](const auto& sb) { return sb->name == name; }));
}

QWidget* SetupPanel::buildRunPanel() {
    auto* group = new QGroupBox(QStringLiteral("Run"));
    auto* form = new QFormLayout(group);
    form->setLabelAlignment(Qt::AlignRight | Qt::AlignVCenter);
    device_ = new QComboBox;
    device_->addItem(QStringLiteral("CPU"));
    device_->addItem(QStringLiteral("GPU (CUDA)"));
    std::string why;
    if (cuda_available(&why)) {
        device_->setToolTip(QStringLiteral(
            "Where the step runs: the CPU, or the GPU with exact device-memory accounting"));
    } else {
        // Disabled, with the reason: no CUDA backend in this build, or no usable GPU.
        device_->setItemData(1, false, Qt::UserRole - 1);
        device_->setItemData(1, to_qstring(why), Qt::ToolTipRole);
        device_->setToolTip(QStringLiteral("Where the step runs; no GPU here: ") + to_qstring(why));
    }
    threads_ = new QSpinBox;
    threads_->setRange(1, std::max(1, QThread::idealThreadCount()));
    threads_->setValue(1);
    threads_->setToolTip(QStringLiteral(
        "CPU threads for the kernels; gradients are bitwise equal across strategies at a fixed "
        "thread count"));
    repeats_ = new QSpinBox;
    repeats_->setRange(1, 100);
    repeats_->setValue(kDefaultRepeats);
    repeats_->setToolTip(QStringLiteral(
        "Timed runs of each strategy after a warm-up run, interleaved round by round like "
        "rematlab-cli compare --repeat: times show as median (min–max)"));
    cap_ = new QLineEdit;
    cap_->setPlaceholderText(QStringLiteral("none (e.g. 32MiB)"));
    cap_->setToolTip(QStringLiteral(
        "Simulate a smaller device: a run that allocates more stops with an error naming the "
        "instruction"));
    form->addRow(QStringLiteral("Device"), device_);
    form->addRow(QStringLiteral("Threads"), threads_);
    form->addRow(QStringLiteral("Repeats"), repeats_);
    form->addRow(QStringLiteral("Memory cap"), cap_);
    link_ = new QDoubleSpinBox;
    link_->setObjectName(QStringLiteral("linkGbps"));
    link_->setRange(0.001, 10000);
    link_->setDecimals(3);
    link_->setValue(TransferRates{}.to_host_gbps);
    link_->setSuffix(QStringLiteral(" GB/s"));
    link_->setToolTip(QStringLiteral(
        "Bandwidth of the device-host link that offloaded values cross, each way (default: PCIe "
        "4.0 x16 as achieved). Strategies with offload plan with it, and the predicted stall "
        "time comes from it"));
    form->addRow(QStringLiteral("Host link"), link_);
    connect(link_, &QDoubleSpinBox::valueChanged, this, [this] {
        if (!suppress_) emit planInputsChanged();
    });
    auto* buttons = new QHBoxLayout;
    run_button_ = new QPushButton(QStringLiteral("Run"));
    run_button_->setObjectName(QStringLiteral("runButton"));
    run_button_->setToolTip(
        QStringLiteral("Plan, execute and compare the ticked strategies (Ctrl+R)"));
    run_button_->setDefault(true);
    run_button_->setMinimumHeight(30);
    cancel_button_ = new QPushButton(QStringLiteral("Cancel"));
    cancel_button_->setToolTip(QStringLiteral("Stop the run between two instructions (Esc)"));
    cancel_button_->setMinimumHeight(30);
    buttons->addWidget(run_button_, 2);
    buttons->addWidget(cancel_button_, 1);
    form->addRow(buttons);
    connect(run_button_, &QPushButton::clicked, this, &SetupPanel::requestRun);
    connect(cancel_button_, &QPushButton::clicked, this, &SetupPanel::cancelRequested);
    connect(threads_, &QSpinBox::valueChanged, this, [this] {
        if (!suppress_) emit planInputsChanged();
    });
    return group;
}

// ---- the network ----------------------------------------------------------------------------

QString SetupPanel::networkSpec() const {
    if (!file_spec_.isEmpty()) return file_spec_;
    const int i = preset_->currentIndex();
    if (i < 0) return {};
    Spec spec{preset_->currentData().toString().toStdString(),
              preset_param_forms_[static_cast<size_t>(i)]->args()};
    return QString::fromStdString(format_spec(spec));
}

void SetupPanel::setNetworkSpec(const QString& spec) {
    if (is_network_file(spec)) {
        showFile(spec);
    } else {
        suppress_ = true;
        showFile({});
        try {
            const Spec parsed = parse_spec(spec.toStdString());
            const int i = preset_->findData(to_qstring(parsed.name));
            if (i < 0 || i == fileItem()) {
                // Let the loader say what is wrong (it lists the presets).
                showFile(spec);
            } else {
                preset_->setCurrentIndex(i);
                preset_forms_->setCurrentIndex(i);
                preset_param_forms_[static_cast<size_t>(i)]->setArgs(parsed.args);
            }
        } catch (const std::exception&) {
            showFile(spec);
        }
        suppress_ = false;
    }
    emit networkEdited(0);
}

int SetupPanel::fileItem() const {
    const int i = static_cast<int>(preset_param_forms_.size());
    return i < preset_->count() ? i : -1;
}

void SetupPanel::showFile(const QString& spec) {
    file_spec_ = spec;
    const bool saved = suppress_;
    suppress_ = true;
    if (spec.isEmpty()) {
        if (fileItem() >= 0) preset_->removeItem(fileItem());
        preset_forms_->setVisible(true);
    } else {
        const QFileInfo info(spec);
        const QString shown = is_network_file(spec) ? info.fileName() : spec;
        if (fileItem() < 0) preset_->addItem(QString());
        const int i = fileItem();
        preset_->setItemText(i, QStringLiteral("file: %1").arg(shown));
        preset_->setItemData(i, spec, Qt::ToolTipRole);
        preset_->setItemData(i, QString());  // not a preset's name
        preset_->setCurrentIndex(i);
        preset_forms_->setVisible(false);
    }
    suppress_ = saved;
}

void SetupPanel::updateSummary() {
    const NetworkSummary& s = network_;
    if (s.plan_only) {  // an abstract benchmark graph: no parameters, no FLOPs, no kernels
        summary_->setText(QStringLiteral("<b>%1</b> — %2 nodes, an abstract benchmark graph "
                                         "(plan-only: no kernels)<br>"
                                         "outputs %3 · peak without recomputation %4")
                              .arg(s.name.toHtmlEscaped())
                              .arg(s.nodes)
                              .arg(bytes_text(s.activation_bytes), bytes_text(s.none_peak_bytes)));
        summary_->setToolTip(s.spec);
        return;
    }
    // The ONNX import's narrowing (engine/networks/slice_narrowing.h) changes what runs: say so.
    const QString narrowed =
        s.narrowed == 0
            ? QString()
            : QStringLiteral(" (%1 narrowed to the part a slice reads)").arg(s.narrowed);
    summary_->setText(QStringLiteral("<b>%1</b> — %2 nodes%8, %3 parameter tensors<br>"
                                     "parameters %4 · activations %5<br>"
                                     "forward %6 · plain backprop peak %7")
                          .arg(s.name.toHtmlEscaped())
                          .arg(s.nodes)
                          .arg(s.params)
                          .arg(bytes_text(s.param_bytes), bytes_text(s.activation_bytes),
                               flops_text(s.forward_flops), bytes_text(s.none_peak_bytes),
                               narrowed));
    summary_->setToolTip(QStringLiteral("%1\ninputs %2").arg(s.spec, bytes_text(s.input_bytes)));
}

// ---- strategies and budget -----------------------------------------------------------------

std::optional<uint64_t> SetupPanel::bytesAtStep(int step) const {
    if (!network_ready_ || network_.none_peak_bytes <= network_.floor_bytes) return std::nullopt;
    // The top is plain backprop's peak exactly (rounding it to print could make it infeasible).
    if (step >= kSliderSteps) return network_.none_peak_bytes;
    const double span = static_cast<double>(network_.none_peak_bytes - network_.floor_bytes);
    const double f = static_cast<double>(step) / kSliderSteps;
    return round_budget(network_.floor_bytes + static_cast<uint64_t>(span * f));
}

std::optional<uint64_t> SetupPanel::sliderBytes() const {
    return bytesAtStep(budget_slider_->value());
}

int SetupPanel::stepAtLeast(uint64_t bytes) const {
    // The first step whose (rounded) budget is not below `bytes`: a budget asked for is never
    // rounded down to one that may be infeasible.
    const double lo = static_cast<double>(network_.floor_bytes);
    const double hi = static_cast<double>(network_.none_peak_bytes);
    const double f = hi > lo ? (static_cast<double>(bytes) - lo) / (hi - lo) : 1.0;
    int step = std::clamp(static_cast<int>(std::floor(f * kSliderSteps)) - 1, 0, kSliderSteps);
    while (step < kSliderSteps && bytesAtStep(step).value_or(UINT64_MAX) < bytes) ++step;
    return step;
}

std::optional<uint64_t> SetupPanel::budgetFor(uint64_t bytes) const {
    if (!network_ready_) return std::nullopt;
    const auto at = bytesAtStep(stepAtLeast(bytes));
    if (!at || *at < bytes) return std::nullopt;  // above the slider's top
    return at;
}

bool SetupPanel::raiseBudgetOneStep() {
    if (!budget_box_->isChecked() || budget_slider_->value() >= kSliderSteps) return false;
    budget_slider_->setValue(budget_slider_->value() + 1);
    return true;
}

std::optional<uint64_t> SetupPanel::budget() const {
    if (!budget_box_->isChecked()) return std::nullopt;
    return sliderBytes();
}

void SetupPanel::setBudget(std::optional<uint64_t> bytes) {
    budget_chosen_ = true;
    if (!bytes) {
        budget_box_->setChecked(false);
        return;
    }
    budget_box_->setChecked(true);
    if (!network_ready_) {
        pending_budget_ = bytes;
        return;
    }
    budget_slider_->setValue(stepAtLeast(*bytes));
}

void SetupPanel::updateBudgetLabel() {
    const auto b = sliderBytes();
    if (!b) {
        budget_label_->setText(QStringLiteral("(load a network)"));
        return;
    }
    const double pct =
        100.0 * static_cast<double>(*b) / static_cast<double>(network_.none_peak_bytes);
    budget_label_->setText(QStringLiteral("<b>%1</b> · %2 % of plain backprop's peak")
                               .arg(bytes_text(*b))
                               .arg(pct, 0, 'f', 0));
}

void SetupPanel::setStrategies(const QStringList& specs) {
    suppress_ = true;
    // Copies go; every original is unticked; then each spec takes the first free box of its
    // strategy, or a new copy.
    std::vector<StrategyBox*> copies;
    for (const auto& sb : strategy_boxes_)
        if (sb->copy) copies.push_back(sb.get());
    for (StrategyBox* sb : copies) removeStrategyBox(sb);
    for (const auto& sb : strategy_boxes_) sb->check->setChecked(false);
    for (const QString& text : specs) {
        Spec spec;
        try {
            spec = parse_spec(text.toStdString());
        } catch (const std::exception& e) {
            emit strategyError(
                QStringLiteral("Bad strategy '%1': %2").arg(text, to_qstring(e.what())));
            continue;
        }
        StrategyBox* box = nullptr;
        bool known = false;
        for (const auto& sb : strategy_boxes_) {
            if (sb->name != to_qstring(spec.name)) continue;
            known = true;
            if (!sb->check->isChecked()) {
                box = sb.get();
                break;
            }
        }
        if (!known) {
            emit strategyError(QStringLiteral("Unknown strategy '%1'").arg(to_qstring(spec.name)));
            continue;
        }
        if (!box) {
            int index = duplicateStrategy(to_qstring(spec.name));
            for (const auto& sb : strategy_boxes_)
                if (sb->name == to_qstring(spec.name) && index-- == 0) box = sb.get();
        }
        box->check->setChecked(true);
        std::vector<std::pair<std::string, std::string>> args;
        for (const auto& [k, v] : spec.args) {
            if (k == "budget" && box->budgeted) {
                try {
                    setBudget(parse_bytes(v));
                } catch (const std::exception&) {
                }
            } else {
                args.emplace_back(k, v);
            }
        }
        if (box->form) box->form->setArgs(args);
    }
    suppress_ = false;
    emit planInputsChanged();
}

QStringList SetupPanel::strategySpecs() const {
    QStringList out;
    const auto b = budget();
    for (const auto& sb : strategy_boxes_) {
        if (!sb->check->isChecked()) continue;
        const Spec spec = sb->spec();
        QString text = QString::fromStdString(format_spec(spec));
        if (sb->budgeted && b)
            text += (spec.args.empty() ? QStringLiteral(":") : QStringLiteral(",")) +
                    QStringLiteral("budget=") + budget_arg(*b);
        if (!out.contains(text)) out << text;  // instances are keyed by their full spec
    }
    return out;
}

QStringList SetupPanel::sweepSpecs() const {
    QStringList out;
    for (const auto& sb : strategy_boxes_) {
        if (!sb->check->isChecked()) continue;
        const QString text = QString::fromStdString(format_spec(sb->spec()));
        if (!out.contains(text)) out << text;
    }
    return out;
}

void SetupPanel::setThreads(int threads) {
    threads_->setValue(threads);
}
void SetupPanel::setRepeats(int repeats) {
    repeats_->setValue(repeats);
}
int SetupPanel::repeats() const {
    return repeats_->value();
}
void SetupPanel::setLinkGbps(double gbps) {
    link_->setValue(gbps);
}
double SetupPanel::linkGbps() const {
    return link_->value();
}
void SetupPanel::setCap(const QString& text) {
    cap_->setText(text);
}

RunRequest SetupPanel::request() const {
    RunRequest r;
    r.network = networkSpec();
    r.strategies = strategySpecs();
    r.threads = threads_->value();
    r.repeats = repeats_->value();
    r.link_gbps = link_->value();
    r.device = device_->currentIndex() == 1 ? QStringLiteral("cuda") : QStringLiteral("cpu");
    const QString cap = cap_->text().trimmed();
    r.cap = cap.isEmpty() ? 0 : parse_bytes(cap.toStdString());
    return r;
}

// ---- what the window says about the network ------------------------------------------------

void SetupPanel::unsetNetwork() {
    network_ready_ = false;
    reload_button_->setVisible(false);
}

void SetupPanel::showLoading(const QString& spec) {
    network_ready_ = false;
    reload_button_->setVisible(false);
    summary_->setText(QStringLiteral("Loading <i>%1</i>…").arg(spec.toHtmlEscaped()));
}

void SetupPanel::setNetwork(const NetworkSummary& summary) {
    network_ = summary;
    network_ready_ = true;
    reload_button_->setVisible(false);
    updateSummary();
    suppress_ = true;
    if (pending_budget_) {
        setBudget(pending_budget_);
        pending_budget_.reset();
    } else if (summary.plan_only && !budget_chosen_ && summary.none_peak_bytes > 0) {
        // An abstract benchmark graph starts at its benchmarks' budget, 0.9 of the peak without
        // recomputation (Checkmate's and Moccasin's rule), not at the slider's middle: no
        // strategy reports a smallest feasible budget there for the first plan to move to.
        const auto b = static_cast<uint64_t>(0.9 * static_cast<double>(summary.none_peak_bytes));
        budget_slider_->setValue(stepAtLeast(b));
    }
    suppress_ = false;
    updateBudgetLabel();
}

void SetupPanel::showNotLoaded() {
    network_ready_ = false;
    reload_button_->setVisible(true);
    summary_->setText(QStringLiteral("<span style='color:#c0392b'>Not loaded</span>"));
}

void SetupPanel::showMissingNetwork(const QString& path, const QString& name) {
    network_ready_ = false;
    reload_button_->setVisible(true);
    showFile(path);
    summary_->setText(
        QStringLiteral("<span style='color:#b9770e'>Network file missing</span>"
                       "<br><i>%1</i><br>showing the copy saved in the session%2")
            .arg(path.toHtmlEscaped(),
                 name.isEmpty() ? QString() : QStringLiteral(" (%1)").arg(name.toHtmlEscaped())));
}

// ---- run options -----------------------------------------------------------------------------

int SetupPanel::threads() const {
    return threads_->value();
}

QString SetupPanel::capText() const {
    return cap_->text();
}

QString SetupPanel::frontierSpec() const {
    for (const auto& sb : strategy_boxes_)
        if (sb->name == QLatin1String("optimal") && sb->check->isChecked())
            return QString::fromStdString(format_spec(sb->spec()));
    return {};
}

void SetupPanel::requestRun() {
    RunRequest r;
    try {
        r = request();
    } catch (const std::exception& e) {
        emit invalidInput(QStringLiteral("Memory cap: %1").arg(to_qstring(e.what())));
        return;
    }
    emit runRequested(r);
}

void SetupPanel::setBusy(bool busy) {
    busy_ = busy;
    run_button_->setEnabled(!busy_ && runnable_);
    cancel_button_->setEnabled(busy);
}

void SetupPanel::setRunnable(bool runnable) {
    runnable_ = runnable;
    run_button_->setEnabled(!busy_ && runnable_);
}

bool SetupPanel::runEnabled() const {
    return run_button_->isEnabled();
}

void SetupPanel::saveSettings(QSettings& s) const {
    s.setValue(QStringLiteral("budget/enabled"), budget_box_->isChecked());
    s.setValue(QStringLiteral("budget/slider"), budget_slider_->value());
    s.setValue(QStringLiteral("threads"), threads_->value());
    s.setValue(QStringLiteral("repeats"), repeats_->value());
    s.setValue(QStringLiteral("cap"), cap_->text());
}

void SetupPanel::loadSettings(QSettings& s) {
    suppress_ = true;
    budget_box_->setChecked(s.value(QStringLiteral("budget/enabled"), true).toBool());
    budget_slider_->setValue(s.value(QStringLiteral("budget/slider"), kSliderSteps / 2).toInt());
    if (s.contains(QStringLiteral("budget/slider"))) budget_chosen_ = true;
    threads_->setValue(s.value(QStringLiteral("threads"), 1).toInt());
    repeats_->setValue(s.value(QStringLiteral("repeats"), kDefaultRepeats).toInt());
    cap_->setText(s.value(QStringLiteral("cap")).toString());
    suppress_ = false;
}

}  // namespace rl::ui
