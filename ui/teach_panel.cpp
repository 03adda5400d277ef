#include "ui/teach_panel.h"

#include <QComboBox>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QSlider>
#include <QSpinBox>
#include <QStyle>
#include <QTextDocument>
#include <QVBoxLayout>
#include <algorithm>

#include "engine/units.h"
#include "ui/palette.h"
#include "ui/qt_text.h"
#include "ui/schedule_palette.h"
#include "ui/schedule_trace.h"

namespace rl::ui {

std::optional<double> instruction_time(const Timeline& t, long index) {
    // Events come in instruction order; an instruction with no event of its own (a Free of
    // nothing live) stands where the next one begins.
    for (size_t i = 0; i < t.points.size() && i < t.instruction.size(); ++i)
        if (t.instruction[i] >= index) return t.points[i].x;
    return std::nullopt;
}

TeachPanel::TeachPanel(QWidget* parent) : QWidget(parent) {
    setObjectName(QStringLiteral("teachPanel"));
    auto* v = new QVBoxLayout(this);
    v->setContentsMargins(6, 4, 6, 4);
    v->setSpacing(4);

    auto* controls = new QHBoxLayout;
    auto button = [&](QStyle::StandardPixmap icon, const QString& tip, const QString& text = {}) {
        auto* b = new QPushButton(style()->standardIcon(icon), text);
        b->setToolTip(tip);
        controls->addWidget(b);
        return b;
    };
    start_ = button(QStyle::SP_MediaSkipBackward, QStringLiteral("Back to the start (Home)"));
    back_ = button(QStyle::SP_MediaSeekBackward, QStringLiteral("One instruction back (←)"));
    play_ = button(QStyle::SP_MediaPlay, QStringLiteral("Play at the chosen speed (Space)"),
                   QStringLiteral("Play"));
    play_->setCheckable(true);
    forward_ = button(QStyle::SP_MediaSeekForward, QStringLiteral("One instruction on (→)"));
    next_bwd_ = button(QStyle::SP_MediaSkipForward,
                       QStringLiteral("On to the next backward step; a second strategy goes to the "
                                      "backward of the same node (End: the last instruction)"),
                       QStringLiteral("Next backward"));
    start_->setShortcut(QKeySequence(Qt::Key_Home));
    back_->setShortcut(QKeySequence(Qt::Key_Left));
    forward_->setShortcut(QKeySequence(Qt::Key_Right));
    speed_ = new QSpinBox;
    speed_->setRange(1, 60);
    speed_->setValue(4);
    speed_->setSuffix(QStringLiteral(" instr/s"));
    speed_->setToolTip(QStringLiteral("Playing speed, instructions per second"));
    controls->addWidget(speed_);
    slider_ = new QSlider(Qt::Horizontal);
    slider_->setToolTip(QStringLiteral("Where in the schedule: drag to jump"));
    controls->addWidget(slider_, 1);
    counter_ = new QLabel;
    counter_->setMinimumWidth(90);
    counter_->setToolTip(QStringLiteral("Instructions applied on the left / in its schedule"));
    controls->addWidget(counter_);
    v->addLayout(controls);

    auto* node_row = new QHBoxLayout;
    node_line_ = new QLabel;
    node_line_->setTextFormat(Qt::RichText);
    node_line_->setWordWrap(true);  // up to 8 marks: one line would set the window's min width
    node_line_->setToolTip(QStringLiteral(
        "The node selected in the graph, the matrix, the residuals or the memory chart: its "
        "instructions in the left strategy's schedule"));
    node_next_ = new QPushButton(QStringLiteral("Next of node"));
    node_next_->setShortcut(QKeySequence(Qt::Key_N));
    node_next_->setToolTip(
        QStringLiteral("On to the selected node's next compute, recompute or backward (N)"));
    node_row->addWidget(node_line_, 1);
    node_row->addWidget(node_next_);
    v->addLayout(node_row);
    connect(node_next_, &QPushButton::clicked, this, [this] { seekNextOfNode(); });

    auto* lanes = new QHBoxLayout;
    lanes->setSpacing(8);
    lanes->addWidget(buildLane(left_, false), 1);
    lanes->addWidget(buildLane(right_, true), 1);
    v->addLayout(lanes, 1);

    connect(start_, &QPushButton::clicked, this, [this] { seek(0); });
    connect(back_, &QPushButton::clicked, this, &TeachPanel::stepBack);
    connect(forward_, &QPushButton::clicked, this, &TeachPanel::stepForward);
    connect(next_bwd_, &QPushButton::clicked, this, &TeachPanel::nextBackward);
    connect(play_, &QPushButton::toggled, this, &TeachPanel::play);
    connect(speed_, &QSpinBox::valueChanged, this, &TeachPanel::setSpeed);
    connect(slider_, &QSlider::valueChanged, this, [this](int p) {
        if (!updating_) seek(p);
    });
    connect(&timer_, &QTimer::timeout, this, [this] {
        if (position() >= size()) {
            play(false);
            return;
        }
        stepForward();
    });
    setSpeed(speed_->value());
    updateControls();
}

TeachPanel::~TeachPanel() = default;

QWidget* TeachPanel::buildLane(Lane& lane, bool right) {
    auto* box = new QWidget;
    auto* v = new QVBoxLayout(box);
    v->setContentsMargins(0, 0, 0, 0);
    v->setSpacing(3);
    auto* top = new QHBoxLayout;
    lane.combo = new QComboBox;
    lane.combo->setToolTip(right ? QStringLiteral("A second strategy stepped in lockstep")
                                 : QStringLiteral("The strategy to step through (also the one "
                                                  "the graph view and the matrix show)"));
    lane.combo->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    lane.combo->setMinimumContentsLength(18);
    lane.where = new QLabel;
    lane.where->setStyleSheet(QStringLiteral("color: #666;"));
    top->addWidget(lane.combo, 1);
    top->addWidget(lane.where);
    v->addLayout(top);
    lane.what = new QLabel;
    QFont f = lane.what->font();
    f.setPointSizeF(f.pointSizeF() + 3);
    f.setBold(true);
    lane.what->setFont(f);
    lane.what->setTextInteractionFlags(Qt::TextSelectableByMouse);
    v->addWidget(lane.what);
    lane.why = new QLabel;
    lane.why->setWordWrap(true);
    lane.why->setAlignment(Qt::AlignLeft | Qt::AlignTop);
    QFont g = lane.why->font();
    g.setPointSizeF(g.pointSizeF() + 1.5);
    lane.why->setFont(g);
    lane.why->setTextInteractionFlags(Qt::TextSelectableByMouse);
    lane.why->setMinimumHeight(64);
    v->addWidget(lane.why, 1);
    lane.live = new QProgressBar;
    lane.live->setRange(0, 1000);
    lane.live->setTextVisible(true);
    lane.live->setMaximumHeight(16);
    lane.live->setToolTip(QStringLiteral("Live bytes after this instruction, against the peak"));
    v->addWidget(lane.live);
    lane.box = box;
    connect(lane.combo, &QComboBox::currentIndexChanged, this, [this, &lane, right](int i) {
        if (updating_) return;
        const int index = lane.combo->itemData(i).toInt();
        const long pos = position();
        bind(lane, index);
        moveTo(pos);
        if (!right) emit leftStrategyChanged(index);
    });
    return box;
}

void TeachPanel::setResults(const std::vector<StrategyResult>& results) {
    // Keep each side on the same spec when it is still there.
    const QString left_spec = left_.index >= 0 && size_t(left_.index) < results_.size()
                                  ? results_[size_t(left_.index)].spec
                                  : QString();
    const QString right_spec = right_.index >= 0 && size_t(right_.index) < results_.size()
                                   ? results_[size_t(right_.index)].spec
                                   : QString();
    const long pos = position();
    results_ = results;
    updating_ = true;
    for (Lane* lane : {&left_, &right_}) {
        lane->combo->clear();
        if (lane == &right_) lane->combo->addItem(QStringLiteral("— none —"), -1);
        for (size_t i = 0; i < results_.size(); ++i)
            if (results_[i].trace) lane->combo->addItem(results_[i].spec, int(i));
    }
    updating_ = false;
    auto find = [&](const QString& spec, int fallback) {
        for (size_t i = 0; i < results_.size(); ++i)
            if (results_[i].trace && results_[i].spec == spec) return int(i);
        return fallback;
    };
    int first = -1;
    for (size_t i = 0; i < results_.size() && first < 0; ++i)
        if (results_[i].trace) first = int(i);
    const int l = find(left_spec, first);
    const int r = right_spec.isEmpty() ? -1 : find(right_spec, -1);
    const bool same = l >= 0 && left_.trace == results_[size_t(l)].trace &&
                      (r < 0 ? !right_.trace : right_.trace == results_[size_t(r)].trace);
    setStrategies(l, r);
    if (same) moveTo(pos);
}

void TeachPanel::setStrategies(int left, int right) {
    const long pos = left == left_.index ? position() : 0;
    bind(left_, left);
    bind(right_, right);
    updating_ = true;
    left_.combo->setCurrentIndex(std::max(0, left_.combo->findData(left)));
    right_.combo->setCurrentIndex(std::max(0, right_.combo->findData(right)));
    updating_ = false;
    moveTo(pos);
}

void TeachPanel::bind(Lane& lane, int index) {
    lane.index = index;
    lane.explanation.reset();
    lane.cursor.reset();
    lane.explainer.reset();
    lane.trace.reset();
    if (index >= 0 && size_t(index) < results_.size() && results_[size_t(index)].trace) {
        lane.trace = results_[size_t(index)].trace;
        const ScheduleTrace& t = *lane.trace;
        lane.explainer = std::make_unique<ScheduleExplainer>(*t.graph, t.plan, t.sim, t.costs);
        lane.cursor = std::make_unique<ScheduleCursor>(*t.graph, t.plan.schedule);
        const QColor c = strategy_color(results_[size_t(index)].name);
        lane.what->setStyleSheet(QStringLiteral("color: %1;").arg(c.darker(130).name()));
    }
    lane.box->setEnabled(lane.trace != nullptr || &lane == &right_);
}

long TeachPanel::position() const {
    return left_.cursor ? left_.cursor->position() : 0;
}

long TeachPanel::size() const {
    return left_.cursor ? left_.cursor->size() : 0;
}

void TeachPanel::moveTo(long position) {
    for (Lane* lane : {&left_, &right_}) {
        if (!lane->cursor) continue;
        lane->cursor->seek(position);
        refresh(*lane);
    }
    updateControls();
    emit stepped();
}

void TeachPanel::seek(long position) {
    moveTo(std::clamp(position, 0L, size()));
}

void TeachPanel::stepForward() {
    if (position() < size()) moveBy(+1);
}

void TeachPanel::stepBack() {
    if (position() > 0) moveBy(-1);
}

// Each side moves from where it stands: after "next backward" the two may stand at different
// instruction indices, aligned on the same backward step.
void TeachPanel::moveBy(long delta) {
    for (Lane* lane : {&left_, &right_}) {
        if (!lane->cursor) continue;
        lane->cursor->seek(lane->cursor->position() + delta);
        refresh(*lane);
    }
    updateControls();
    emit stepped();
}

void TeachPanel::nextBackward() {
    if (!left_.cursor) return;
    const Schedule& s = left_.trace->plan.schedule;
    long p = position();
    while (p < size() && s.code[size_t(p)].kind != InstrKind::Backward) ++p;
    if (p >= size()) {
        moveTo(size());
        return;
    }
    const NodeId node = s.code[size_t(p)].target;
    left_.cursor->seek(p + 1);
    refresh(left_);
    if (right_.cursor) {
        // The right side to just after its backward of the same node.
        const Schedule& r = right_.trace->plan.schedule;
        long k = 0;
        while (k < long(r.size()) &&
               !(r.code[size_t(k)].kind == InstrKind::Backward && r.code[size_t(k)].target == node))
            ++k;
        right_.cursor->seek(std::min<long>(k + 1, long(r.size())));
        refresh(right_);
    }
    updateControls();
    emit stepped();
}

void TeachPanel::play(bool on) {
    if (on && position() >= size()) seek(0);
    if (on)
        timer_.start();
    else
        timer_.stop();
    if (play_->isChecked() != on) play_->setChecked(on);
    play_->setText(on ? QStringLiteral("Pause") : QStringLiteral("Play"));
    play_->setIcon(style()->standardIcon(on ? QStyle::SP_MediaPause : QStyle::SP_MediaPlay));
}

void TeachPanel::setSpeed(int instructions_per_second) {
    timer_.setInterval(1000 / std::max(1, instructions_per_second));
    if (speed_->value() != instructions_per_second) speed_->setValue(instructions_per_second);
}

void TeachPanel::refresh(Lane& lane) {
    if (!lane.cursor) {
        lane.what->setText(&lane == &right_ ? QStringLiteral("Pick a second strategy to compare")
                                            : QStringLiteral("Plan a strategy to step through it"));
        lane.why->clear();
        lane.where->clear();
        lane.live->setValue(0);
        lane.live->setFormat(QString());
        return;
    }
    const long pos = lane.cursor->position();
    const ScheduleTrace& t = *lane.trace;
    if (pos == 0) {
        lane.explanation.reset();
        lane.what->setText(QStringLiteral("Before the first instruction"));
        lane.why->setText(QStringLiteral(
            "Only the parameters and the inputs are in memory. Step on (→) to run the forward."));
        const uint64_t floor = t.graph->param_bytes() + t.graph->input_bytes();
        lane.live->setValue(
            int(1000.0 * double(floor) / double(std::max<uint64_t>(1, t.sim.peak_bytes))));
        lane.live->setFormat(QStringLiteral("live %1").arg(bytes_text(floor)));
    } else {
        lane.explanation = lane.explainer->explain(pos - 1);
        const Explanation& e = *lane.explanation;
        lane.what->setText(QStringLiteral("#%1  %2").arg(e.index).arg(to_qstring(e.what)));
        lane.why->setText(to_qstring(e.why));
        lane.live->setValue(
            int(1000.0 * double(e.live_bytes) / double(std::max<uint64_t>(1, t.sim.peak_bytes))));
        lane.live->setFormat(QStringLiteral("live %1 of peak %2%3")
                                 .arg(bytes_text(e.live_bytes), bytes_text(t.sim.peak_bytes),
                                      e.at_peak ? QStringLiteral("  ← the peak") : QString()));
    }
    lane.where->setText(QStringLiteral("%1 / %2").arg(pos).arg(lane.cursor->size()));
}

void TeachPanel::updateControls() {
    const bool any = left_.cursor != nullptr;
    updating_ = true;
    slider_->setRange(0, int(size()));
    slider_->setValue(int(position()));
    updating_ = false;
    start_->setEnabled(any && position() > 0);
    back_->setEnabled(any && position() > 0);
    forward_->setEnabled(any && position() < size());
    next_bwd_->setEnabled(any && position() < size());
    play_->setEnabled(any);
    counter_->setText(any ? QStringLiteral("%1 / %2").arg(position()).arg(size()) : QString());
    if (!left_.cursor) refresh(left_);
    if (!right_.cursor) refresh(right_);
    updateNodeLine();
}

void TeachPanel::setSelectedNode(int node) {
    selected_node_ = node;
    node_marks_of_.reset();
    updateNodeLine();
}

bool TeachPanel::seekNextOfNode() {
    if (!left_.trace || selected_node_ < 0) return false;
    const long k = next_instruction_of(left_.trace->plan.schedule, selected_node_, position());
    if (k < 0) return false;
    seek(k + 1);
    return true;
}

void TeachPanel::updateNodeLine() {
    const ScheduleTrace* t = left_.trace.get();
    if (!t || selected_node_ < 0 || selected_node_ >= t->graph->num_nodes()) {
        node_line_->setText(QStringLiteral(
            "<span style='color:#777'>Select a node (click it in any view) to see its "
            "instructions here</span>"));
        node_next_->setEnabled(false);
        return;
    }
    // One pass over the schedule per node or strategy, not per step.
    if (node_marks_of_.get() != t) {
        node_marks_ = node_marks(t->plan.schedule, selected_node_);
        node_marks_of_ = left_.trace;
    }
    const long current = position() - 1;
    QStringList parts;
    constexpr size_t kShown = 8;
    // The listed window: up to kShown marks around the current instruction.
    size_t first = 0;
    while (first < node_marks_.size() && node_marks_[first].instruction < current) ++first;
    first = first > kShown / 2 ? first - kShown / 2 : 0;
    first = std::min(first, node_marks_.size() > kShown ? node_marks_.size() - kShown : 0);
    if (first > 0) parts << QStringLiteral("…");
    for (size_t i = first; i < node_marks_.size() && i < first + kShown; ++i) {
        const NodeMark& m = node_marks_[i];
        const QString text =
            QStringLiteral("#%1 %2").arg(m.instruction).arg(QLatin1String(mark_kind_name(m.kind)));
        parts << (m.instruction == current ? QStringLiteral("<b style='color:%1'>▶ %2</b>")
                                                 .arg(schedule_palette::selected().name(), text)
                                           : text);
    }
    if (first + kShown < node_marks_.size()) parts << QStringLiteral("…");
    node_line_->setText(QStringLiteral("Selected <b>%1</b>: %2")
                            .arg(to_qstring(t->graph->node(selected_node_).name).toHtmlEscaped(),
                                 parts.isEmpty() ? QStringLiteral("not in this schedule")
                                                 : parts.join(QStringLiteral(" · "))));
    node_next_->setEnabled(!node_marks_.empty());
}

QString TeachPanel::nodeLine() const {
    QTextDocument doc;
    doc.setHtml(node_line_->text());
    return doc.toPlainText();
}

const ScheduleState* TeachPanel::state() const {
    return left_.cursor ? &left_.cursor->state() : nullptr;
}
const Explanation* TeachPanel::explanation() const {
    return left_.explanation ? &*left_.explanation : nullptr;
}
std::shared_ptr<const ScheduleTrace> TeachPanel::trace() const {
    return left_.trace;
}
const ScheduleState* TeachPanel::rightState() const {
    return right_.cursor ? &right_.cursor->state() : nullptr;
}
const Explanation* TeachPanel::rightExplanation() const {
    return right_.explanation ? &*right_.explanation : nullptr;
}
QString TeachPanel::sentence() const {
    return left_.what->text() + QLatin1Char('\n') + left_.why->text();
}

}  // namespace rl::ui
