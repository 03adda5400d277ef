#include "ui/memory_profiler.h"

#include <QAreaSeries>
#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineSeries>
#include <QMouseEvent>
#include <QSplitter>
#include <QTreeWidget>
#include <QVBoxLayout>
#include <QValueAxis>
#include <algorithm>

#include "ui/palette.h"
#include "ui/qt_text.h"
#include "ui/schedule_trace.h"

namespace rl::ui {

StackedLayers stacked_layers(const std::vector<KindBytes>& stacks, const std::vector<double>& x,
                             double divisor) {
    StackedLayers out;
    if (stacks.empty() || x.size() != stacks.size()) return out;
    std::vector<uint64_t> below(stacks.size(), 0);
    for (int k = 0; k < kNumMemoryKinds; ++k) {
        bool any = false;
        for (const KindBytes& s : stacks) any = any || s[static_cast<size_t>(k)] != 0;
        if (!any) continue;
        // Stepped by hand, keeping every point: all layers then have the same xs, point for
        // point (chart_math's stepped() drops the steps where a layer does not change).
        std::vector<XY> edge;
        edge.reserve(2 * stacks.size());
        for (size_t e = 0; e < stacks.size(); ++e) {
            below[e] += stacks[e][static_cast<size_t>(k)];
            const double y = static_cast<double>(below[e]) / divisor;
            if (e > 0) edge.push_back({x[e], edge.back().y});
            edge.push_back({x[e], y});
        }
        out.kinds.push_back(static_cast<MemoryKind>(k));
        out.upper.push_back(std::move(edge));
    }
    return out;
}

std::vector<double> instruction_axis(const std::vector<int32_t>& event_instruction,
                                     long instructions) {
    std::vector<double> x;
    x.reserve(event_instruction.size());
    bool started = false;
    for (int32_t i : event_instruction) {
        if (i >= 0) started = true;
        x.push_back(i >= 0 ? double(i) : started ? double(instructions) : -1.0);
    }
    return x;
}

namespace {

// memory_viz-like colours, one per kind, stable.
QColor kind_color(MemoryKind k) {
    switch (k) {
        case MemoryKind::Parameters:
            return QColor(0x7f, 0x7f, 0x7f);
        case MemoryKind::ParamGrads:
            return QColor(0xbc, 0xbd, 0x22);
        case MemoryKind::Inputs:
            return QColor(0x8c, 0x56, 0x4b);
        case MemoryKind::SavedActivations:
            return QColor(0x1f, 0x77, 0xb4);
        case MemoryKind::Recomputed:
            return QColor(0xff, 0x7f, 0x0e);
        case MemoryKind::ActivationGrads:
            return QColor(0x94, 0x67, 0xbd);
        case MemoryKind::Workspace:
            return QColor(0x2c, 0xa0, 0x2c);
        case MemoryKind::Count:
            break;
    }
    return Qt::black;
}

QList<QPointF> to_points(const std::vector<XY>& v) {
    QList<QPointF> out;
    out.reserve(static_cast<qsizetype>(v.size()));
    for (const XY& p : v) out.append(QPointF(p.x, p.y));
    return out;
}

}  // namespace

MemoryBreakdownChart::MemoryBreakdownChart(QWidget* parent) : QChartView(parent) {
    auto* c = new QChart;
    c->legend()->setAlignment(Qt::AlignBottom);
    c->setMargins(QMargins(4, 4, 4, 4));
    setChart(c);
    setRenderHint(QPainter::Antialiasing);
    setRubberBand(QChartView::HorizontalRubberBand);
    x_ = new QValueAxis;
    y_ = new QValueAxis;
    x_->setTitleText(QStringLiteral("time (ms)"));
    y_->setTitleText(QStringLiteral("live memory"));
    c->addAxis(x_, Qt::AlignBottom);
    c->addAxis(y_, Qt::AlignLeft);
    // A zoom moves x only; y follows what is visible.
    connect(x_, &QValueAxis::rangeChanged, this, [this] { fitY(); });
}

void MemoryBreakdownChart::setData(const std::vector<KindBytes>& stacks,
                                   const std::vector<double>& x,
                                   const std::vector<int32_t>& instruction, const QString& x_title,
                                   bool stacked) {
    QChart* c = chart();
    c->removeAllSeries();
    xs_ = x;
    instruction_ = instruction;
    totals_.clear();
    layers_ = 0;
    uint64_t top = 0;
    for (const KindBytes& s : stacks) {
        totals_.push_back(total_bytes(s));
        top = std::max(top, totals_.back());
    }
    const ByteUnit unit = byte_unit_for(top);
    divisor_ = unit.divisor;
    x_->setTitleText(x_title);
    y_->setTitleText(QStringLiteral("live memory (%1)").arg(QString::fromLatin1(unit.name)));
    if (stacks.empty() || x.size() != stacks.size()) {
        x_min_ = 0;
        x_max_ = 1;
        resetZoom();
        return;
    }
    if (stacked) {
        const StackedLayers layers = stacked_layers(stacks, x, divisor_);
        QLineSeries* lower = nullptr;
        for (size_t k = 0; k < layers.kinds.size(); ++k) {
            auto* upper = new QLineSeries;
            upper->replace(to_points(layers.upper[k]));
            auto* area = new QAreaSeries(upper, lower);
            area->setName(QString::fromLatin1(memory_kind_name(layers.kinds[k])));
            const QColor col = kind_color(layers.kinds[k]);
            area->setColor(col);
            area->setBorderColor(col.darker(130));
            c->addSeries(area);
            area->attachAxis(x_);
            area->attachAxis(y_);
            lower = upper;
            ++layers_;
        }
    } else {
        std::vector<XY> total;
        for (size_t e = 0; e < stacks.size(); ++e)
            total.push_back({x[e], static_cast<double>(totals_[e]) / divisor_});
        auto* line = new QLineSeries;
        line->setName(QStringLiteral("total"));
        line->replace(to_points(stepped(total)));
        c->addSeries(line);
        line->attachAxis(x_);
        line->attachAxis(y_);
    }
    x_min_ = *std::min_element(x.begin(), x.end());
    x_max_ = *std::max_element(x.begin(), x.end());
    if (x_max_ <= x_min_) x_max_ = x_min_ + 1;
    x_->setLabelFormat(QString::fromStdString(label_format(fit_axis(x_max_ - x_min_).step)));
    resetZoom();
}

void MemoryBreakdownChart::resetZoom() {
    x_->setRange(x_min_, x_max_);
    fitY();
}

void MemoryBreakdownChart::fitY() {
    // The largest total shown in the visible x range (a step holds its value until the next
    // event, so the event just before the range counts too).
    uint64_t top = 0;
    const double lo = x_->min(), hi = x_->max();
    for (size_t e = 0; e < xs_.size(); ++e) {
        const bool before_next = e + 1 < xs_.size() && xs_[e + 1] >= lo;
        if ((xs_[e] >= lo && xs_[e] <= hi) || (xs_[e] < lo && before_next))
            top = std::max(top, totals_[e]);
    }
    const AxisFit fit = fit_axis(static_cast<double>(top) / divisor_);
    set_axis(y_, fit);
}

long MemoryBreakdownChart::instructionAtX(double x) const {
    long at = -1;
    for (size_t e = 0; e < xs_.size() && xs_[e] <= x; ++e)
        if (instruction_[e] >= 0) at = instruction_[e];
    return at;
}

void MemoryBreakdownChart::mousePressEvent(QMouseEvent* event) {
    press_pos_ = event->pos();
    double_clicked_ = false;
    QChartView::mousePressEvent(event);
}

void MemoryBreakdownChart::mouseReleaseEvent(QMouseEvent* event) {
    const bool click = (event->pos() - press_pos_).manhattanLength() < 4;
    if (click && event->button() == Qt::LeftButton && !double_clicked_) {
        const QPointF value = chart()->mapToValue(chart()->mapFromScene(mapToScene(event->pos())));
        if (chart()->plotArea().contains(chart()->mapFromScene(mapToScene(event->pos())))) {
            const long i = instructionAtX(value.x());
            if (i >= 0) emit instructionClicked(i);
        }
        event->accept();
        return;
    }
    if (event->button() == Qt::RightButton) {  // QChartView's right-click zooms out: keep it sane
        resetZoom();
        event->accept();
        return;
    }
    QChartView::mouseReleaseEvent(event);
}

void MemoryBreakdownChart::mouseDoubleClickEvent(QMouseEvent* event) {
    // Resets the zoom only: the click that began it selects nothing more.
    double_clicked_ = true;
    resetZoom();
    event->accept();
}

MemoryProfilerPage::MemoryProfilerPage(QWidget* parent) : QWidget(parent) {
    strategy_ = new QComboBox;
    source_ = new QComboBox;
    source_->addItems({QStringLiteral("Predicted"), QStringLiteral("Measured")});
    axis_ = new QComboBox;
    axis_->addItems({QStringLiteral("Time (ms)"), QStringLiteral("Instruction index")});
    axis_->setToolTip(QStringLiteral(
        "Instruction index: predicted and measured are the same events, so they line up exactly"));
    stacked_ = new QCheckBox(QStringLiteral("Stacked by category"));
    stacked_->setChecked(true);
    compare_ = new QComboBox;
    compare_->setToolTip(QStringLiteral(
        "What this strategy holds at its peak that the other does not, and the reverse"));
    chart_ = new MemoryBreakdownChart;
    panel_title_ = new QLabel(QStringLiteral("Click the chart to see what is live there"));
    panel_title_->setWordWrap(true);
    panel_ = new QTreeWidget;
    panel_->setColumnCount(4);
    // Bytes first, as in memory_viz: the panel is narrow and the size is what is read.
    panel_->setHeaderLabels({QStringLiteral("Bytes"), QStringLiteral("Tensor"),
                             QStringLiteral("Fate"), QStringLiteral("Category")});
    panel_->setRootIsDecorated(false);
    panel_->setAlternatingRowColors(true);
    panel_->header()->setSectionResizeMode(QHeaderView::ResizeToContents);

    auto* row = new QHBoxLayout;
    row->setContentsMargins(8, 4, 8, 0);
    row->addWidget(new QLabel(QStringLiteral("Strategy")));
    row->addWidget(strategy_);
    row->addWidget(source_);
    row->addWidget(new QLabel(QStringLiteral("x:")));
    row->addWidget(axis_);
    row->addWidget(stacked_);
    row->addStretch(1);
    // Strategy labels can be long: the combos take a fixed share and elide, so that this page
    // never sets the window's minimum width (it is a hidden page most of the time).
    for (QComboBox* box : {strategy_, compare_}) {
        box->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
        box->setMinimumContentsLength(14);
    }

    // The peak comparison is about the live-set panel: its control sits above it.
    auto* compare_row = new QHBoxLayout;
    compare_row->setContentsMargins(0, 0, 0, 0);
    compare_row->addWidget(new QLabel(QStringLiteral("Compare peak with")));
    compare_row->addWidget(compare_, 1);

    auto* right = new QWidget;
    auto* rv = new QVBoxLayout(right);
    rv->setContentsMargins(4, 0, 0, 0);
    rv->addLayout(compare_row);
    rv->addWidget(panel_title_);
    rv->addWidget(panel_, 1);
    auto* split = new QSplitter(Qt::Horizontal);
    split->addWidget(chart_);
    split->addWidget(right);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 2);
    split->setSizes({600, 400});

    auto* v = new QVBoxLayout(this);
    v->setContentsMargins(0, 0, 0, 0);
    v->addLayout(row);
    v->addWidget(split, 1);

    connect(strategy_, &QComboBox::activated, this,
            [this](int i) { setCurrent(strategy_->itemData(i).toInt()); });
    connect(source_, &QComboBox::currentIndexChanged, this, [this] { refreshChart(); });
    connect(axis_, &QComboBox::currentIndexChanged, this, [this] { refreshChart(); });
    connect(stacked_, &QCheckBox::toggled, this, [this] { refreshChart(); });
    connect(compare_, &QComboBox::activated, this, [this](int i) {
        const int other = compare_->itemData(i).toInt();
        if (other >= 0) showPeakDiff(other);
    });
    connect(chart_, &MemoryBreakdownChart::instructionClicked, this,
            &MemoryProfilerPage::showLiveSet);
}

void MemoryProfilerPage::setResults(const std::vector<StrategyResult>& results) {
    // A replay is kept while its result still carries the same plan.
    std::map<int, Replayed> kept;
    for (auto& [i, r] : replays_)
        if (i < static_cast<int>(results.size()) && results[size_t(i)].trace &&
            results[size_t(i)].trace.get() == r.keep.get())
            kept.emplace(i, std::move(r));
    replays_ = std::move(kept);
    results_ = results;
    if (current_ >= static_cast<int>(results_.size()) ||
        (current_ >= 0 && !results_[size_t(current_)].trace))
        current_ = -1;
    // Until one is chosen in the table: the last planned strategy, as teach mode (`none`, the
    // baseline, usually comes first).
    if (current_ < 0)
        for (size_t i = results_.size(); i-- > 0 && current_ < 0;)
            if (results_[i].trace) current_ = static_cast<int>(i);
    refreshChoices();
    refreshChart();
    // A result that changed elsewhere (another row's run) keeps what the panel shows; a new plan
    // for the strategy shown opens on its peak again.
    const void* trace = current_ >= 0 ? results_[size_t(current_)].trace.get() : nullptr;
    if (trace != panel_trace_) showPeak();
}

void MemoryProfilerPage::showPeak() {
    panel_trace_ = current_ >= 0 ? results_[size_t(current_)].trace.get() : nullptr;
    // Where a memory_viz user looks first: the live set at the peak.
    if (current_ >= 0 && results_[size_t(current_)].trace)
        showLiveSet(results_[size_t(current_)].trace->sim.peak_instruction);
    else
        panel_->clear();
}

void MemoryProfilerPage::setCurrent(int index) {
    if (index < 0 || index >= static_cast<int>(results_.size()) || !results_[size_t(index)].trace)
        return;
    current_ = index;
    refreshChoices();
    refreshChart();
    showPeak();
}

const MemoryReplay* MemoryProfilerPage::replayOf(int index) {
    if (index < 0 || index >= static_cast<int>(results_.size())) return nullptr;
    const auto& trace = results_[size_t(index)].trace;
    if (!trace) return nullptr;
    auto it = replays_.find(index);
    if (it == replays_.end() || it->second.keep.get() != trace.get()) {
        Replayed r{trace, replay_memory(*trace->graph, trace->plan.schedule)};
        it = replays_.insert_or_assign(index, std::move(r)).first;
    }
    return &it->second.replay;
}

void MemoryProfilerPage::refreshChoices() {
    const QSignalBlocker b1(strategy_), b2(compare_);
    strategy_->clear();
    compare_->clear();
    compare_->addItem(QStringLiteral("—"), -1);
    for (size_t i = 0; i < results_.size(); ++i) {
        if (!results_[i].trace) continue;
        const QString label = results_[i].spec.isEmpty() ? results_[i].name : results_[i].spec;
        strategy_->addItem(label, static_cast<int>(i));
        if (static_cast<int>(i) != current_) compare_->addItem(label, static_cast<int>(i));
        if (static_cast<int>(i) == current_) strategy_->setCurrentIndex(strategy_->count() - 1);
    }
}

void MemoryProfilerPage::refreshChart() {
    const MemoryReplay* r = replayOf(current_);
    if (!r) {
        chart_->setData({}, {}, {}, QStringLiteral("time (ms)"), stacked_->isChecked());
        return;
    }
    const StrategyResult& res = results_[size_t(current_)];
    const bool measured = source_->currentIndex() == 1;
    const bool by_instruction = axis_->currentIndex() == 1;
    std::vector<KindBytes> stacks = r->stacks;
    std::vector<int32_t> instruction = r->event_instruction;
    std::shared_ptr<const Timeline> timeline =
        measured ? res.measured_timeline : res.predicted_timeline;
    if (measured) {
        if (!res.measured_timeline) {
            chart_->setData({}, {}, {}, QStringLiteral("time (ms)"), stacked_->isChecked());
            panel_title_->setText(
                QStringLiteral("No measured timeline for %1 yet: run it first.").arg(res.spec));
            return;
        }
        std::vector<TimelinePoint> points;
        for (size_t i = 0; i < timeline->points.size(); ++i)
            points.push_back({timeline->points[i].x, static_cast<uint64_t>(timeline->points[i].y),
                              timeline->instruction[i]});
        try {
            stacks = measured_stacks(*r, points);
        } catch (const std::exception& e) {
            panel_title_->setText(to_qstring(e.what()));
            stacks.clear();
        }
        instruction.assign(timeline->instruction.begin(),
                           timeline->instruction.begin() + static_cast<long>(stacks.size()));
    }
    std::vector<double> x;
    if (by_instruction) {
        x = instruction_axis(instruction, static_cast<long>(res.trace->plan.schedule.size()));
    } else if (timeline && timeline->points.size() >= stacks.size()) {
        for (size_t i = 0; i < stacks.size(); ++i) x.push_back(timeline->points[i].x);
    } else {
        x = instruction_axis(instruction, static_cast<long>(res.trace->plan.schedule.size()));
    }
    chart_->setData(stacks, x, instruction,
                    by_instruction ? QStringLiteral("instruction") : QStringLiteral("time (ms)"),
                    stacked_->isChecked());
}

void MemoryProfilerPage::showLiveSet(long index) {
    const MemoryReplay* r = replayOf(current_);
    if (!r) return;
    const ScheduleTrace& t = *results_[size_t(current_)].trace;
    if (index < 0 || index >= static_cast<long>(t.plan.schedule.size())) return;
    const LiveSet set = live_set_at(*t.graph, t.plan.schedule, *r, index);
    panel_title_->setText(
        QStringLiteral("%1 at #%2 (%3): %4 live in %5 tensors, largest first")
            .arg(results_[size_t(current_)].spec)
            .arg(index)
            .arg(to_qstring(describe(*t.graph, t.plan.schedule.code[size_t(index)])))
            .arg(bytes_text(set.bytes))
            .arg(set.tensors.size()));
    panel_->clear();
    for (const LiveTensor& x : set.tensors) {
        auto* item =
            new QTreeWidgetItem({bytes_text(x.bytes), to_qstring(x.name), to_qstring(x.fate_text()),
                                 QString::fromLatin1(memory_kind_name(x.kind))});
        item->setForeground(3, kind_color(x.kind).darker(120));
        item->setTextAlignment(0, Qt::AlignRight | Qt::AlignVCenter);
        panel_->addTopLevelItem(item);
    }
}

void MemoryProfilerPage::showPeakDiff(int other) {
    const MemoryReplay* ra = replayOf(current_);
    const MemoryReplay* rb = replayOf(other);
    if (!ra || !rb) return;
    const ScheduleTrace& ta = *results_[size_t(current_)].trace;
    const ScheduleTrace& tb = *results_[size_t(other)].trace;
    const LiveSet a = live_set_at_peak(*ta.graph, ta.plan.schedule, *ra);
    const LiveSet b = live_set_at_peak(*tb.graph, tb.plan.schedule, *rb);
    const LiveSetDiff d = diff_live_sets(a, b);
    const QString na = results_[size_t(current_)].spec, nb = results_[size_t(other)].spec;
    const QString sign = d.delta >= 0 ? QStringLiteral("higher") : QStringLiteral("lower");
    panel_title_->setText(
        QStringLiteral("Peak of %1 (%2, #%3) is %4 %5 than %6's (%7, #%8); both hold %9")
            .arg(na, bytes_text(a.bytes))
            .arg(a.instruction)
            .arg(bytes_text(static_cast<uint64_t>(d.delta >= 0 ? d.delta : -d.delta)), sign, nb,
                 bytes_text(b.bytes))
            .arg(b.instruction)
            .arg(bytes_text(d.common_bytes)));
    panel_->clear();
    for (const LiveSetDiffEntry& e : d.only_a)
        panel_->addTopLevelItem(new QTreeWidgetItem(
            {"+" + bytes_text(e.bytes_a), to_qstring(e.name), QStringLiteral("only in %1").arg(na),
             QString::fromLatin1(memory_kind_name(e.kind_a))}));
    for (const LiveSetDiffEntry& e : d.only_b)
        panel_->addTopLevelItem(new QTreeWidgetItem(
            {"−" + bytes_text(e.bytes_b), to_qstring(e.name), QStringLiteral("only in %1").arg(nb),
             QString::fromLatin1(memory_kind_name(e.kind_b))}));
}

}  // namespace rl::ui
