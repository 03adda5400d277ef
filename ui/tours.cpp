#include "ui/tours.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QVBoxLayout>

#include "engine/networks/presets.h"
#include "engine/simulator.h"
#include "engine/units.h"
#include "solvers/revolve.h"
#include "strategies/policy.h"
#include "strategies/strategy.h"
#include "ui/palette.h"

namespace rl::ui {

namespace {

struct Figures {
    uint64_t peak = 0, activation_peak = 0;
    long recomputes = 0;
    double recompute_ms = 0, total_ms = 0;
    Plan plan;
};

Figures figures(const Graph& g, const std::string& spec) {
    const CostModel costs = CostModel::analytic(g, DeviceRates{});
    Figures f;
    f.plan = plan_with(g, costs, parse_spec(spec));
    SimulateOptions so;
    so.record_timeline = false;
    const Simulation sim = simulate(g, f.plan.schedule, costs, so);
    f.peak = sim.peak_bytes;
    f.activation_peak = sim.activation_peak_bytes();
    f.recomputes = sim.recomputes;
    f.recompute_ms = sim.recompute_ms;
    f.total_ms = sim.total_ms();
    return f;
}

QString b(uint64_t bytes) {
    return QStringLiteral("<b>%1</b>").arg(bytes_text(bytes));
}

QString pct(uint64_t part, uint64_t whole) {
    return QString::number(whole ? 100.0 * double(part) / double(whole) : 0, 'f', 0) +
           QStringLiteral(" %");
}

const char* kActNet = "mlp:depth=6,width=128,batch=512";
const char* kSqrtNet = "mlp:depth=16,width=64,batch=256";
const char* kChain = "chain:l=8,width=64,batch=128";
const char* kPolicyNet = "resmlp:depth=2,width=64,batch=64";
const char* kWholeNet = "mlp:depth=4,width=256,batch=256";

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
         [] {
             const Graph g = load_network(kActNet);
             const Figures f = figures(g, "none");
             return QStringLiteral(
                        "<p>This MLP has %1 of parameters, but its forward produces %2 of "
                        "activations: every layer's output for all 512 rows of the batch.</p>"
                        "<p>Plain backprop (<i>none</i>) keeps what the backward reads, so its "
                        "peak is %3 — activations are %4 of it. Teach mode below stands at the "
                        "peak: the start of the backward, when everything saved is still live.</p>")
                 .arg(b(g.param_bytes()), b(g.activation_bytes()), b(f.peak),
                      pct(f.activation_peak, f.peak));
         }});
    act.steps.push_back(
        {QStringLiteral("Double the batch, double the activations"),
         QStringLiteral("mlp:depth=6,width=128,batch=1024"),
         {QStringLiteral("none")},
         0,
         -1,
         QStringLiteral("peak"),
         TourView::Memory,
         [] {
             const Graph small = load_network(kActNet);
             const Graph big = load_network("mlp:depth=6,width=128,batch=1024");
             return QStringLiteral(
                        "<p>With batch 1024 instead of 512 the parameters stay at %1, while the "
                        "activations go from %2 to %3 and the peak from %4 to %5.</p><p>That is "
                        "why checkpointing targets activations: they scale with batch and "
                        "sequence length, parameters do not.</p>")
                 .arg(b(big.param_bytes()), b(small.activation_bytes()), b(big.activation_bytes()),
                      b(figures(small, "none").peak), b(figures(big, "none").peak));
         }});
    act.steps.push_back(
        {QStringLiteral("What plain backprop keeps"),
         QString::fromLatin1(kActNet),
         {QStringLiteral("none")},
         0,
         -1,
         QStringLiteral("backward"),
         TourView::Graph,
         [] {
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
         [] {
             const Graph g = load_network(kSqrtNet);
             const Figures f = figures(g, "sqrt-n");
             return QStringLiteral(
                        "<p><i>sqrt-n</i> cuts the network into about √n segments at "
                        "articulation points and keeps only the segment boundaries (dark "
                        "diamonds: %1 checkpoints) through the forward.</p><p>Orange boxes are "
                        "recomputed in the backward; ×2 says how often they run.</p>")
                 .arg(f.plan.checkpoints.size());
         }});
    sq.steps.push_back(
        {QStringLiteral("Memory for time"),
         QString::fromLatin1(kSqrtNet),
         {QStringLiteral("none"), QStringLiteral("sqrt-n")},
         1,
         0,
         QStringLiteral("peak"),
         TourView::Memory,
         [] {
             const Graph g = load_network(kSqrtNet);
             const Figures none = figures(g, "none"), sq = figures(g, "sqrt-n");
             return QStringLiteral(
                        "<p>Peak: %1 with <i>none</i>, %2 with <i>sqrt-n</i> (activations %3 → "
                        "%4). The price: %5 recomputations, %6 ms more (predicted).</p><p>The "
                        "saw-tooth in the backward is one segment recomputed at a time.</p>")
                 .arg(b(none.peak), b(sq.peak), b(none.activation_peak), b(sq.activation_peak))
                 .arg(sq.recomputes)
                 .arg(sq.recompute_ms, 0, 'f', 2);
         }});
    sq.steps.push_back(
        {QStringLiteral("The schedule, stage by stage"),
         QString::fromLatin1(kSqrtNet),
         {QStringLiteral("none"), QStringLiteral("sqrt-n")},
         1,
         0,
         QStringLiteral("recompute"),
         TourView::Matrix,
         [] {
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
             [slot_count] {
                 const int64_t l = 8;
                 const int64_t r = revolve::repetition(l, slot_count);
                 const int64_t t = revolve::min_advances(l, slot_count);
                 const Graph g = load_network(kChain);
                 const Figures f = figures(g, "revolve:slots=" + std::to_string(slot_count));
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
                     .arg(bytes_text(f.peak));
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
         [] {
             const Graph g = load_network(kPolicyNet);
             auto saved = [&](const char* spec) {
                 return saved_residuals(g, figures(g, spec).plan.schedule);
             };
             const SavedResiduals none = saved("none"), dots = saved("policy:policy=dots_saveable"),
                                  nothing = saved("policy:policy=nothing_saveable");
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
         [] {
             const Graph g = load_network(kPolicyNet);
             const Figures none = figures(g, "none"),
                           dots = figures(g, "policy:policy=dots_saveable");
             return QStringLiteral(
                        "<p>Orange boxes are what the policy recomputes: the ops that are not "
                        "dots. Peak %1 → %2 for %3 ms of recompute (predicted).</p>")
                 .arg(b(none.peak), b(dots.peak))
                 .arg(dots.recompute_ms, 0, 'f', 3);
         }});
    out.push_back(std::move(po));

    // ---- checkpointing a whole function ----
    Tour wh{QStringLiteral("whole-function"),
            QStringLiteral("Checkpointing a whole small function may not lower the peak"),
            {}};
    const QString whole = QStringLiteral("policy:regions=model,policy=nothing_saveable");
    wh.steps.push_back(
        {QStringLiteral("One region around the whole model"),
         QString::fromLatin1(kWholeNet),
         {QStringLiteral("none"), whole},
         1,
         0,
         QStringLiteral("peak"),
         TourView::Memory,
         [] {
             const Graph g = load_network(kWholeNet);
             const Figures none = figures(g, "none"),
                           all = figures(g, "policy:regions=model,policy=nothing_saveable");
             const bool same = all.peak >= none.peak;
             return QStringLiteral(
                        "<p><code>jax.checkpoint</code> around the whole model saves nothing "
                        "inside it, so the backward first recomputes the whole forward — and "
                        "then holds every activation again, exactly as plain backprop did.</p>"
                        "<p>Peak: %1 with <i>none</i>, %2 with the whole model checkpointed "
                        "(%3), for %4 recomputations.</p>")
                 .arg(b(none.peak), b(all.peak),
                      same ? QStringLiteral("<b>no lower</b>")
                           : QStringLiteral("lower by %1").arg(bytes_text(none.peak - all.peak)))
                 .arg(all.recomputes);
         }});
    wh.steps.push_back(
        {QStringLiteral("Segments do lower it"),
         QString::fromLatin1(kSqrtNet),
         {QStringLiteral("none"), QStringLiteral("policy:regions=model,policy=nothing_saveable"),
          QStringLiteral("sqrt-n")},
         1,
         2,
         QStringLiteral("peak"),
         TourView::Memory,
         [] {
             const Graph g = load_network(kSqrtNet);
             const Figures none = figures(g, "none"),
                           all = figures(g, "policy:regions=model,policy=nothing_saveable"),
                           sq = figures(g, "sqrt-n");
             return QStringLiteral(
                        "<p>What lowers the peak is freeing activations <i>during</i> the "
                        "backward: recompute one segment, run its backwards, free it, go on. On "
                        "this deeper MLP: <i>none</i> %1, whole model checkpointed %2, "
                        "<i>sqrt-n</i> %3.</p>")
                 .arg(b(none.peak), b(all.peak), b(sq.peak));
         }});
    out.push_back(std::move(wh));
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
    showStep(0);
}

void TourPanel::showStep(int step) {
    if (tour_ < 0) return;
    const Tour& t = tours()[size_t(tour_)];
    step_ = std::clamp(step, 0, int(t.steps.size()) - 1);
    const TourStep& s = t.steps[size_t(step_)];
    title_->setText(
        QStringLiteral("%1 — %2 (%3/%4)").arg(t.title, s.title).arg(step_ + 1).arg(t.steps.size()));
    QString body;
    try {
        body = s.text ? s.text() : QString();
    } catch (const std::exception& e) {
        body = QStringLiteral("<p>(This step could not compute its figures: %1)</p>")
                   .arg(QString::fromUtf8(e.what()).toHtmlEscaped());
    }
    body_->setText(body);
    back_->setEnabled(step_ > 0);
    next_->setText(size_t(step_ + 1) < t.steps.size() ? QStringLiteral("Next ▶")
                                                      : QStringLiteral("Finish"));
    if (apply) apply(s);
}

QString TourPanel::text() const {
    return title_->text() + QLatin1Char('\n') + body_->text();
}

}  // namespace rl::ui
