#include "ui/tours.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QVBoxLayout>

#include <algorithm>
#include <map>
#include <stdexcept>

#include "engine/params.h"
#include "solvers/revolve.h"
#include "strategies/policy.h"
#include "strategies/strategy.h"
#include "ui/palette.h"
#include "ui/schedule_trace.h"

namespace rl::ui {

namespace {

// A spec's value for each key of its strategy's schema, defaults filled in, but the budget (the
// form writes only what differs from the defaults, in its own order).
std::pair<std::string, std::map<std::string, std::string>> resolved(const QString& spec) {
    const Spec parsed = parse_spec(spec.toStdString());
    const Strategy& strategy = find_strategy(parsed.name);
    std::map<std::string, std::string> values;
    for (const ParamSpec& p : strategy.schema()) values[p.key] = p.default_value;
    for (const auto& [key, value] : parsed.args) values[key] = value;
    values.erase("budget");
    return {parsed.name, std::move(values)};
}

// The row the window planned for `spec`: a step's figures must name the row they come from.
const StrategyResult& need(const TourShown& s, const char* spec) {
    const StrategyResult* r = s.row(QString::fromLatin1(spec));
    if (!r || !r->planned || !r->trace)
        throw std::runtime_error(std::string("the window shows no plan of ") + spec);
    return *r;
}

QString b(uint64_t bytes) {
    return QStringLiteral("<b>%1</b>").arg(bytes_text(bytes));
}

QString pct(uint64_t part, uint64_t whole) {
    return QString::number(whole ? 100.0 * double(part) / double(whole) : 0, 'f', 0) +
           QStringLiteral(" %");
}

SavedResiduals residuals_of(const StrategyResult& r) {
    return saved_residuals(*r.trace->graph, r.trace->plan.schedule);
}

const char* kActNet = "mlp:depth=6,width=128,batch=512";
const char* kActNetBig = "mlp:depth=6,width=128,batch=1024";
const char* kSqrtNet = "mlp:depth=16,width=64,batch=256";
const char* kChain = "chain:l=8,width=64,batch=128";
const char* kPolicyNet = "resmlp:depth=2,width=64,batch=64";
const char* kWholeNet = "mlp:depth=4,width=256,batch=256";
const char* kWhole = "policy:regions=model,policy=nothing_saveable";
const char* kOffloadNet = "mlp:depth=6,width=256,batch=2048";
const char* kRecomputeOnly = "optimal:budget=14MiB";
const char* kWithOffload = "optimal:budget=14MiB,offload=1";

// One step of "offload or recompute?": the same budget planned with recompute alone and with
// offload as a third choice, on a host link of `gbps`; the words compare the two rows.
TourStep offload_step(QString title, double gbps) {
    TourStep st;
    st.title = std::move(title);
    st.network = QString::fromLatin1(kOffloadNet);
    st.strategies = {QStringLiteral("none"), QString::fromLatin1(kRecomputeOnly),
                     QString::fromLatin1(kWithOffload)};
    st.teach_left = 2;
    st.teach_right = 1;
    st.teach_at = QStringLiteral("start");
    st.view = TourView::Memory;
    st.link_gbps = gbps;
    st.text = [gbps](const TourShown& s) {
        const StrategyResult &rec = need(s, kRecomputeOnly), &off = need(s, kWithOffload);
        const double a = rec.predicted_recompute_ms + rec.predicted_stall_ms;
        const double b2 = off.predicted_recompute_ms + off.predicted_stall_ms;
        QString text =
            QStringLiteral(
                "<p>Host link: <b>%1 GB/s</b> each way (Setup's <i>Host link</i>). Both plans "
                "meet the same budget. Recompute alone (<i>optimal</i>) peaks at %2 and pays "
                "%3 recomputations, %4 ms.</p>")
                .arg(gbps, 0, 'g', 4)
                .arg(b(rec.predicted_peak))
                .arg(rec.recomputes)
                .arg(ms_text(rec.predicted_recompute_ms));
        if (off.predicted_host_peak == 0) {
            text += QStringLiteral(
                        "<p>With offload allowed, the planner still chose <b>no offload</b>: at "
                        "this bandwidth a copy costs more waiting than recomputing, so "
                        "<i>offload=1</i> gives back the recompute-only plan (%1 recomputations, "
                        "%2 ms).</p>")
                        .arg(off.recomputes)
                        .arg(ms_text(off.predicted_recompute_ms));
        } else {
            text += QStringLiteral(
                        "<p>With offload allowed, it keeps up to %1 in host memory (the dotted "
                        "line), recomputes %2 times (%3 ms) and waits %4 ms for copies (the "
                        "table's Stall column). The copies run beside the kernels, so only the "
                        "wait costs time.</p>")
                        .arg(b(off.predicted_host_peak))
                        .arg(off.recomputes)
                        .arg(ms_text(off.predicted_recompute_ms), ms_text(off.predicted_stall_ms));
        }
        text += QStringLiteral("<p>%1</p>")
                    .arg(b2 < a ? QStringLiteral("Recomputation plus waiting is less than "
                                                 "recomputation alone: here <b>offload wins</b>.")
                                : QStringLiteral("Here <b>recompute wins</b> (or ties)."));
        return text;
    };
    return st;
}

}  // namespace

int tour_row(const std::vector<StrategyResult>& results, const QString& spec) {
    try {
        const auto want = resolved(spec);
        for (size_t i = 0; i < results.size(); ++i) {
            try {
                if (resolved(results[i].spec) == want) return int(i);
            } catch (const std::exception&) {
            }
        }
    } catch (const std::exception&) {
    }
    return -1;
}

const StrategyResult* TourShown::row(const QString& spec) const {
    const int i = tour_row(results, spec);
    return i < 0 ? nullptr : &results[size_t(i)];
}

namespace {

std::vector<Tour> build() {
    std::vector<Tour> out;

    // ---- why activations dominate memory ----
    Tour act{QStringLiteral("activations"), QStringLiteral("Why activations dominate memory"), {}};
    act.steps.push_back(
        {QStringLiteral("Parameters are small; activations are not"),
         QString::fromLatin1(kActNet),
         {QStringLiteral("none")},
         0,
         -1,
         QStringLiteral("peak"),
         TourView::Memory,
         [](const TourShown& s) {
             const StrategyResult& none = need(s, "none");
             return QStringLiteral(
                        "<p>This MLP has %1 of parameters, but its forward produces %2 of "
                        "activations: every layer's output for all 512 rows of the batch.</p>"
                        "<p>Plain backprop (<i>none</i>) keeps what the backward reads, so its "
                        "peak is %3 — activations are %4 of it. Teach mode below stands at the "
                        "peak: the start of the backward, when everything saved is still live.</p>")
                 .arg(b(s.network.param_bytes), b(s.network.activation_bytes),
                      b(none.predicted_peak),
                      pct(none.predicted_activation_peak, none.predicted_peak));
         }});
    act.steps.push_back(
        {QStringLiteral("Double the batch, double the activations"),
         QString::fromLatin1(kActNetBig),
         {QStringLiteral("none")},
         0,
         -1,
         QStringLiteral("peak"),
         TourView::Memory,
         [](const TourShown& s) {
             const StrategyResult& none = need(s, "none");
             QString text = QStringLiteral(
                                "<p>With batch 1024 the parameters stay at %1, while the "
                                "activations are %2 and the peak is %3.")
                                .arg(b(s.network.param_bytes), b(s.network.activation_bytes),
                                     b(none.predicted_peak));
             // The comparison quotes what the previous step (batch 512) showed, when the user
             // came from it.
             const StrategyResult* before =
                 s.previous ? s.previous->row(QStringLiteral("none")) : nullptr;
             if (before && before->planned)
                 text +=
                     QStringLiteral(" At batch 512 (the previous step) they were %1 and %2.")
                         .arg(b(s.previous->network.activation_bytes), b(before->predicted_peak));
             return text + QStringLiteral(
                               "</p><p>That is why checkpointing targets activations: they scale "
                               "with batch and sequence length, parameters do not.</p>");
         }});
    act.steps.push_back(
        {QStringLiteral("What plain backprop keeps"),
         QString::fromLatin1(kActNet),
         {QStringLiteral("none")},
         0,
         -1,
         QStringLiteral("backward"),
         TourView::Graph,
         [](const TourShown&) {
             return QStringLiteral(
                 "<p>Green boxes are kept for the backward; grey-blue dashed ones are freed early "
                 "because no backward reads them (a linear layer's output: relu's backward "
                 "reads relu's own output, linear's reads its input).</p><p>Step with → in "
                 "Teach mode: boxes turn pale when their value leaves memory.</p>");
         }});
    out.push_back(std::move(act));

    // ---- sqrt(n) ----
    Tour sq{QStringLiteral("sqrt-n"), QStringLiteral("√n segments (Chen et al. 2016)"), {}};
    sq.steps.push_back(
        {QStringLiteral("Keep only segment boundaries"),
         QString::fromLatin1(kSqrtNet),
         {QStringLiteral("none"), QStringLiteral("sqrt-n")},
         1,
         0,
         QStringLiteral("start"),
         TourView::Graph,
         [](const TourShown& s) {
             const StrategyResult& sq = need(s, "sqrt-n");
             return QStringLiteral(
                        "<p><i>sqrt-n</i> cuts the network into about √n segments at "
                        "articulation points and keeps only the segment boundaries (dark "
                        "diamonds: %1 checkpoints) through the forward.</p><p>Orange boxes are "
                        "recomputed in the backward; ×2 says how often they run.</p>")
                 .arg(sq.trace->plan.checkpoints.size());
         }});
    sq.steps.push_back(
        {QStringLiteral("Memory for time"),
         QString::fromLatin1(kSqrtNet),
         {QStringLiteral("none"), QStringLiteral("sqrt-n")},
         1,
         0,
         QStringLiteral("peak"),
         TourView::Memory,
         [](const TourShown& s) {
             const StrategyResult &none = need(s, "none"), &sq = need(s, "sqrt-n");
             return QStringLiteral(
                        "<p>Peak: %1 with <i>none</i>, %2 with <i>sqrt-n</i> (activations %3 → "
                        "%4). The price: %5 recomputations, %6 ms more (predicted, as in the "
                        "table).</p><p>The saw-tooth in the backward is one segment recomputed "
                        "at a time.</p>")
                 .arg(b(none.predicted_peak), b(sq.predicted_peak),
                      b(none.predicted_activation_peak), b(sq.predicted_activation_peak))
                 .arg(sq.recomputes)
                 .arg(ms_text(sq.predicted_recompute_ms));
         }});
    sq.steps.push_back(
        {QStringLiteral("The schedule, stage by stage"),
         QString::fromLatin1(kSqrtNet),
         {QStringLiteral("none"), QStringLiteral("sqrt-n")},
         1,
         0,
         QStringLiteral("recompute"),
         TourView::Matrix,
         [](const TourShown&) {
             return QStringLiteral(
                 "<p>Each row is a stage: the forward, then one backward step. Orange cells "
                 "are recomputations: each segment is replayed from its boundary just before "
                 "its backwards need it. Teach mode stands at the first recompute, with "
                 "<i>none</i> beside it in lockstep — press <i>Next backward</i>.</p>");
         }});
    out.push_back(std::move(sq));

    // ---- Revolve ----
    Tour rv{QStringLiteral("revolve"), QStringLiteral("Revolve's binomial reversal"), {}};
    for (int slot_count : {2, 3}) {
        const QString spec = QStringLiteral("revolve:slots=%1").arg(slot_count);
        rv.steps.push_back(
            {QStringLiteral("%1 slots on a chain of 8").arg(slot_count),
             QString::fromLatin1(kChain),
             {QStringLiteral("none"), spec},
             1,
             -1,
             QStringLiteral("recompute"),
             TourView::Matrix,
             [slot_count, spec](const TourShown& s) {
                 const int64_t l = 8;
                 const int64_t r = revolve::repetition(l, slot_count);
                 const int64_t t = revolve::min_advances(l, slot_count);
                 const StrategyResult& f = need(s, spec.toLatin1().constData());
                 return QStringLiteral(
                            "<p>Griewank's Revolve reverses l = 8 steps with s = %1 checkpoint "
                            "slots (the input holds one). The <b>repetition number is r = "
                            "%2</b>: "
                            "no step is advanced more than %2 times, since β(s, r) = C(s+r, s) "
                            "= %3 ≥ l.</p><p>It needs t(l, s) = r·l − β(s+1, r−1) = <b>%4</b> "
                            "forward steps — the fewest possible (the plan: %5 recomputations, "
                            "peak %6). The matrix shows the binomial pattern: long advances "
                            "early, shorter ones as slots free up.</p>")
                     .arg(slot_count)
                     .arg(r)
                     .arg(revolve::beta(slot_count, r))
                     .arg(t)
                     .arg(f.recomputes)
                     .arg(bytes_text(f.predicted_peak));
             }});
    }
    out.push_back(std::move(rv));

    // ---- JAX policy ----
    Tour po{QStringLiteral("policy"), QStringLiteral("A JAX-style policy: dots_saveable"), {}};
    po.steps.push_back(
        {QStringLiteral("What dots_saveable keeps"),
         QString::fromLatin1(kPolicyNet),
         {QStringLiteral("none"), QStringLiteral("policy:policy=dots_saveable"),
          QStringLiteral("policy:policy=nothing_saveable")},
         1,
         -1,
         QStringLiteral("start"),
         TourView::Residuals,
         [](const TourShown& s) {
             const SavedResiduals none = residuals_of(need(s, "none")),
                                  dots = residuals_of(need(s, "policy:policy=dots_saveable")),
                                  nothing = residuals_of(need(s, "policy:policy=nothing_saveable"));
             return QStringLiteral(
                        "<p><code>jax.checkpoint(block, policy=dots_saveable)</code> saves the "
                        "outputs of matmul-like ops (our <i>dot</i> tag: the fc layers) inside "
                        "each remat region and recomputes the cheap rest (layernorm, gelu) in "
                        "the backward.</p><p>Saved residuals: %1 values, %2 with <i>none</i>; "
                        "%3 values, %4 with <i>dots_saveable</i>; %5 values, %6 with "
                        "<i>nothing_saveable</i>. The table lists them as "
                        "<code>print_saved_residuals</code> would; click a row to find it in "
                        "the graph.</p>")
                 .arg(none.rows.size())
                 .arg(bytes_text(none.total_bytes))
                 .arg(dots.rows.size())
                 .arg(bytes_text(dots.total_bytes))
                 .arg(nothing.rows.size())
                 .arg(bytes_text(nothing.total_bytes));
         }});
    po.steps.push_back(
        {QStringLiteral("The cheap ops are recomputed"),
         QString::fromLatin1(kPolicyNet),
         {QStringLiteral("none"), QStringLiteral("policy:policy=dots_saveable")},
         1,
         0,
         QStringLiteral("recompute"),
         TourView::Graph,
         [](const TourShown& s) {
             const StrategyResult &none = need(s, "none"),
                                  &dots = need(s, "policy:policy=dots_saveable");
             return QStringLiteral(
                        "<p>Orange boxes are what the policy recomputes: the ops that are not "
                        "dots. Peak %1 → %2 for %3 ms of recompute (predicted, as in the "
                        "table).</p>")
                 .arg(b(none.predicted_peak), b(dots.predicted_peak))
                 .arg(ms_text(dots.predicted_recompute_ms));
         }});
    out.push_back(std::move(po));

    // ---- checkpointing a whole function ----
    Tour wh{QStringLiteral("whole-function"),
            QStringLiteral("Checkpointing a whole small function may not lower the peak"),
            {}};
    const QString whole = QString::fromLatin1(kWhole);
    wh.steps.push_back(
        {QStringLiteral("One region around the whole model"),
         QString::fromLatin1(kWholeNet),
         {QStringLiteral("none"), whole},
         1,
         0,
         QStringLiteral("peak"),
         TourView::Memory,
         [](const TourShown& s) {
             const StrategyResult &none = need(s, "none"), &all = need(s, kWhole);
             const bool same = all.predicted_peak >= none.predicted_peak;
             return QStringLiteral(
                        "<p><code>jax.checkpoint</code> around the whole model saves nothing "
                        "inside it, so the backward first recomputes the whole forward — and "
                        "then holds every activation again, exactly as plain backprop did.</p>"
                        "<p>Peak: %1 with <i>none</i>, %2 with the whole model checkpointed "
                        "(%3), for %4 recomputations.</p>")
                 .arg(b(none.predicted_peak), b(all.predicted_peak),
                      same ? QStringLiteral("<b>no lower</b>")
                           : QStringLiteral("lower by %1")
                                 .arg(bytes_text(none.predicted_peak - all.predicted_peak)))
                 .arg(all.recomputes);
         }});
    wh.steps.push_back(
        {QStringLiteral("Segments do lower it"),
         QString::fromLatin1(kSqrtNet),
         {QStringLiteral("none"), whole, QStringLiteral("sqrt-n")},
         1,
         2,
         QStringLiteral("peak"),
         TourView::Memory,
         [](const TourShown& s) {
             const StrategyResult &none = need(s, "none"), &all = need(s, kWhole),
                                  &sq = need(s, "sqrt-n");
             return QStringLiteral(
                        "<p>What lowers the peak is freeing activations <i>during</i> the "
                        "backward: recompute one segment, run its backwards, free it, go on. On "
                        "this deeper MLP: <i>none</i> %1, whole model checkpointed %2, "
                        "<i>sqrt-n</i> %3.</p>")
                 .arg(b(none.predicted_peak), b(all.predicted_peak), b(sq.predicted_peak));
         }});
    out.push_back(std::move(wh));

    // ---- offload or recompute? ----
    Tour off{QStringLiteral("offload"), QStringLiteral("Offload or recompute?"), {}};
    off.steps.push_back(
        offload_step(QStringLiteral("A fast link: offloading is nearly free"), 1000));
    off.steps.push_back(
        offload_step(QStringLiteral("PCIe 4.0: copies hide behind the kernels"), 25));
    off.steps.push_back(offload_step(QStringLiteral("A slow link: recomputing is cheaper"), 0.05));
    out.push_back(std::move(off));
    return out;
}

}  // namespace

const std::vector<Tour>& tours() {
    static const std::vector<Tour> all = build();
    return all;
}

TourPanel::TourPanel(QWidget* parent) : QWidget(parent) {
    setObjectName(QStringLiteral("tourPanel"));
    auto* v = new QVBoxLayout(this);
    v->setContentsMargins(8, 6, 8, 6);
    title_ = new QLabel;
    QFont f = title_->font();
    f.setPointSizeF(f.pointSizeF() + 2);
    f.setBold(true);
    title_->setFont(f);
    title_->setWordWrap(true);
    body_ = new QLabel;
    body_->setWordWrap(true);
    body_->setTextFormat(Qt::RichText);
    body_->setAlignment(Qt::AlignLeft | Qt::AlignTop);
    QFont g = body_->font();
    g.setPointSizeF(g.pointSizeF() + 1);
    body_->setFont(g);
    v->addWidget(title_);
    v->addWidget(body_, 1);
    auto* buttons = new QHBoxLayout;
    back_ = new QPushButton(QStringLiteral("◀ Back"));
    next_ = new QPushButton(QStringLiteral("Next ▶"));
    back_->setToolTip(QStringLiteral("The previous step of the tour"));
    next_->setToolTip(QStringLiteral("The next step of the tour"));
    buttons->addStretch(1);
    buttons->addWidget(back_);
    buttons->addWidget(next_);
    v->addLayout(buttons);
    connect(back_, &QPushButton::clicked, this, [this] { showStep(step_ - 1); });
    connect(next_, &QPushButton::clicked, this, [this] {
        if (tour_ >= 0 && size_t(step_ + 1) >= tours()[size_t(tour_)].steps.size())
            emit finished();
        else
            showStep(step_ + 1);
    });
}

void TourPanel::start(int tour) {
    if (tour < 0 || size_t(tour) >= tours().size()) return;
    tour_ = tour;
    step_ = -1;
    shown_.reset();
    showStep(0);
}

void TourPanel::showStep(int step) {
    if (tour_ < 0) return;
    const Tour& t = tours()[size_t(tour_)];
    const int from = step_;
    step_ = std::clamp(step, 0, int(t.steps.size()) - 1);
    // A step may compare with the one the user just came from (Next), never with another.
    if (from != step_) {
        previous_ = (shown_ && from == step_ - 1) ? shown_ : nullptr;
        shown_.reset();
    }
    const TourStep& s = t.steps[size_t(step_)];
    title_->setText(
        QStringLiteral("%1 — %2 (%3/%4)").arg(t.title, s.title).arg(step_ + 1).arg(t.steps.size()));
    // The text waits for the window's plan of this step (showFigures).
    body_->setText(QStringLiteral("<p><i>Planning this step…</i></p>"));
    back_->setEnabled(step_ > 0);
    next_->setText(size_t(step_ + 1) < t.steps.size() ? QStringLiteral("Next ▶")
                                                      : QStringLiteral("Finish"));
    if (apply) apply(s);
}

void TourPanel::showFigures(const TourShown& shown) {
    if (tour_ < 0) return;
    const TourStep& s = tours()[size_t(tour_)].steps[size_t(step_)];
    auto figures = std::make_shared<TourShown>(shown);
    figures->previous = previous_;
    QString body;
    try {
        body = s.text ? s.text(*figures) : QString();
    } catch (const std::exception& e) {
        body = QStringLiteral("<p>(This step could not compute its figures: %1)</p>")
                   .arg(QString::fromUtf8(e.what()).toHtmlEscaped());
    }
    shown_ = std::move(figures);
    body_->setText(body);
}

QString TourPanel::text() const {
    return title_->text() + QLatin1Char('\n') + body_->text();
}

}  // namespace rl::ui
