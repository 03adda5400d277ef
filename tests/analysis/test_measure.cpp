// Measurements with their noise (analysis/measure.h, Evaluator::compare): spreads, the
// within-noise rule, the round-by-round interleaving, and the invariants on every repeat.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <random>

#include "analysis/evaluate.h"
#include "analysis/measure.h"
#include "engine/backend.h"
#include "engine/errors.h"
#include "engine/executor.h"
#include "engine/networks/presets.h"
#include "strategies/strategy.h"

namespace rl {
namespace {

TEST(Measure, SpreadIsTheMedianAndRangeOfTheSamples) {
    std::mt19937 rng(7);
    for (int n = 1; n <= 9; ++n) {
        std::vector<double> v;
        std::uniform_real_distribution<double> d(0.5, 40.0);
        for (int i = 0; i < n; ++i) v.push_back(d(rng));
        const Spread s = spread_of(v);
        // Reference: the median as the element(s) in the middle by counting, not by sorting.
        auto below = [&](double x) {
            return std::count_if(v.begin(), v.end(), [&](double y) { return y < x; });
        };
        if (n % 2) {
            EXPECT_EQ(below(s.median), n / 2) << n;
        } else {
            std::vector<double> sorted = v;
            std::sort(sorted.begin(), sorted.end());
            EXPECT_DOUBLE_EQ(s.median, (sorted[n / 2 - 1] + sorted[n / 2]) / 2);
        }
        EXPECT_EQ(s.min, *std::min_element(v.begin(), v.end()));
        EXPECT_EQ(s.max, *std::max_element(v.begin(), v.end()));
        EXPECT_LE(s.min, s.median);
        EXPECT_LE(s.median, s.max);
        EXPECT_EQ(s.samples, n);
    }
    EXPECT_EQ(spread_of({}).samples, 0);
}

TEST(Measure, OverlappingRangesAreWithinNoiseAndNotASignedFigure) {
    // The header's example: medians 10.2 and 10.6, ranges overlap.
    const Spread none = spread_of({10.1, 10.4, 10.2});
    const Spread periodic = spread_of({10.3, 10.9, 10.6});
    const Overhead o = overhead_against(periodic, none);
    EXPECT_NEAR(o.percent, (10.6 / 10.2 - 1) * 100, 1e-9);
    EXPECT_TRUE(o.within_noise);
    const std::string text = format_overhead(o);
    EXPECT_EQ(text, "within noise");
    EXPECT_EQ(text.find('%'), std::string::npos);
    EXPECT_EQ(text.find('+'), std::string::npos);

    // Disjoint ranges: a signed figure, either way.
    const Spread slower = spread_of({12.0, 12.5, 12.2});
    const Overhead up = overhead_against(slower, none);
    EXPECT_FALSE(up.within_noise);
    EXPECT_EQ(format_overhead(up), "+19.6 %");
    const Overhead down = overhead_against(none, slower);
    EXPECT_FALSE(down.within_noise);
    EXPECT_EQ(format_overhead(down), "-16.4 %");
    // Touching ranges overlap.
    EXPECT_TRUE(overhead_against(spread_of({10.4, 11, 12}), none).within_noise);
    // One sample has no range: never claimed to be within noise.
    EXPECT_FALSE(overhead_against(spread_of({10.2}), none).within_noise);
}

TEST(Measure, CompareInterleavesRoundByRoundAfterAWarmUp) {
    const Graph g = load_network("mlp:depth=6,width=32,batch=16");
    EvaluateOptions eo;
    eo.repeat = 3;
    Evaluator ev(g, "mlp", eo);
    const std::vector<Spec> specs = {parse_spec("none"), parse_spec("sqrt-n"),
                                     parse_spec("periodic:k=2")};
    std::vector<std::pair<int, size_t>> heard;
    const Comparison c =
        ev.compare(specs, [&](int round, size_t i) { heard.emplace_back(round, i); });
    std::vector<std::pair<int, size_t>> expected, planned;
    for (size_t i = 0; i < specs.size(); ++i) planned.emplace_back(kPlanningRound, i);
    for (int round = 0; round <= 3; ++round)
        for (size_t i = 0; i < specs.size(); ++i) expected.emplace_back(round, i);
    EXPECT_EQ(c.order, expected);
    // The listener hears each strategy's planning first, then every step.
    planned.insert(planned.end(), expected.begin(), expected.end());
    EXPECT_EQ(heard, planned);
    EXPECT_EQ(c.rounds_done, 3);
    EXPECT_FALSE(c.cancelled);
    ASSERT_EQ(c.strategies.size(), 3u);
    for (const ComparedStrategy& s : c.strategies) {
        SCOPED_TRACE(s.eval.strategy);
        EXPECT_FALSE(s.error);
        ASSERT_TRUE(s.eval.measured);
        ASSERT_TRUE(s.eval.times);
        EXPECT_EQ(s.eval.measured->peak_bytes, s.eval.predicted.peak_bytes);
        EXPECT_TRUE(s.eval.grads_bitwise_equal_to_none);
        EXPECT_FALSE(s.eval.measured->timeline.empty()) << "the first timed step's timeline";
        for (const Spread* sp :
             {&s.eval.times->forward, &s.eval.times->recompute, &s.eval.times->backward,
              &s.eval.times->total, &s.eval.times->cpu}) {
            EXPECT_EQ(sp->samples, 3);
            EXPECT_LE(sp->min, sp->median);
            EXPECT_LE(sp->median, sp->max);
        }
        EXPECT_EQ(s.eval.measured->total_ms, s.eval.times->total.median);
    }
}

// A comparison keeps no strategy's gradients once checked against none's (S strategies held S
// copies of every gradient), unless asked to (`run --dump-grads`); the check itself still runs.
TEST(Measure, CompareDropsEachStrategysGradientsUnlessAskedToKeepThem) {
    const Graph g = load_network("mlp:depth=4,width=16,batch=8");
    const std::vector<Spec> specs = {parse_spec("none"), parse_spec("sqrt-n")};
    for (const bool keep : {false, true}) {
        SCOPED_TRACE(keep ? "kept" : "dropped");
        EvaluateOptions eo;
        eo.keep_measured_gradients = keep;
        Evaluator ev(g, "mlp", eo);
        const Comparison c = ev.compare(specs);
        ASSERT_EQ(c.strategies.size(), 2u);
        for (const ComparedStrategy& s : c.strategies) {
            ASSERT_TRUE(s.eval.measured);
            EXPECT_TRUE(s.eval.grads_bitwise_equal_to_none);
            EXPECT_EQ(s.eval.measured->param_grads.size(),
                      keep ? static_cast<size_t>(g.num_params()) : 0u);
        }
    }
}

// The executor hands each parameter's gradient over once as the step ends, with the values it
// keeps when asked to keep them; a caller that only compares them holds no copy of them all.
TEST(Measure, AStepHandsEachGradientOverOnceWithTheValuesItWouldKeep) {
    const Graph g = load_network("resmlp:depth=2,width=16,batch=8");
    const auto backend = make_backend("cpu", 1);
    const CostModel costs = CostModel::analytic(g, DeviceRates{});
    const RunData data = RunData::seeded(g);
    const Schedule s = plan_with(g, costs, parse_spec("sqrt-n")).schedule;
    const Execution kept = execute(g, s, *backend, data);
    ASSERT_EQ(kept.param_grads.size(), static_cast<size_t>(g.num_params()));
    for (const bool keep : {false, true}) {
        SCOPED_TRACE(keep ? "kept too" : "only handed over");
        std::vector<int> times(static_cast<size_t>(g.num_params()), 0);
        ExecuteOptions eo;
        eo.keep_gradients = keep;
        eo.on_gradient = [&](ParamId p, const float* v, size_t count) {
            ASSERT_GE(p, 0);
            ASSERT_LT(p, g.num_params());
            ++times[static_cast<size_t>(p)];
            const std::vector<float>& want = kept.param_grads[static_cast<size_t>(p)];
            ASSERT_EQ(count, want.size()) << g.param(p).name;
            EXPECT_EQ(0, std::memcmp(v, want.data(), count * sizeof(float))) << g.param(p).name;
        };
        const Execution e = execute(g, s, *backend, data, eo);
        for (int t : times) EXPECT_EQ(t, 1);
        EXPECT_EQ(e.param_grads.size(), keep ? kept.param_grads.size() : 0u);
        EXPECT_EQ(e.peak_bytes, kept.peak_bytes);  // the hand-over is outside the tracked step
    }
}

TEST(Measure, AStrategyOverTheCapLeavesTheLaterRoundsAndTheOthersGoOn) {
    const Graph g = load_network("mlp:depth=8,width=64,batch=256");
    EvaluateOptions plan_only;
    plan_only.execute = false;
    Evaluator planner(g, "mlp", plan_only);
    const uint64_t sqrt_peak = planner.evaluate(parse_spec("sqrt-n")).predicted.peak_bytes;
    const uint64_t none_peak = planner.evaluate(parse_spec("none")).predicted.peak_bytes;
    ASSERT_LT(sqrt_peak, none_peak);

    EvaluateOptions eo;
    eo.repeat = 2;
    eo.cap = sqrt_peak;  // none does not fit, sqrt-n does
    Evaluator ev(g, "mlp", eo);
    const Comparison c = ev.compare({parse_spec("none"), parse_spec("sqrt-n")});
    const std::vector<std::pair<int, size_t>> expected = {{0, 0}, {0, 1}, {1, 1}, {2, 1}};
    EXPECT_EQ(c.order, expected);
    ASSERT_TRUE(c.strategies[0].error);
    EXPECT_THROW(std::rethrow_exception(c.strategies[0].error), CapExceeded);
    EXPECT_FALSE(c.strategies[0].eval.measured);
    EXPECT_FALSE(c.strategies[1].error);
    ASSERT_TRUE(c.strategies[1].eval.times);
    EXPECT_EQ(c.strategies[1].eval.times->total.samples, 2);
}

TEST(Measure, ACancellationKeepsTheRoundsEveryStrategyCompleted) {
    const Graph g = load_network("mlp:depth=6,width=32,batch=16");
    std::atomic<bool> cancel{false};
    EvaluateOptions eo;
    eo.repeat = 3;
    eo.cancel = &cancel;
    Evaluator ev(g, "mlp", eo);
    // Cancelled as the second strategy of round 2 is about to run: round 1 is complete.
    const Comparison c =
        ev.compare({parse_spec("none"), parse_spec("sqrt-n")}, [&](int round, size_t i) {
            if (round == 2 && i == 1) cancel = true;
        });
    EXPECT_TRUE(c.cancelled);
    EXPECT_EQ(c.rounds_done, 1);
    for (const ComparedStrategy& s : c.strategies) {
        ASSERT_TRUE(s.eval.times) << s.eval.strategy;
        EXPECT_EQ(s.eval.times->total.samples, 1) << "the cut round counts for none";
    }
    EXPECT_THROW(ev.evaluate(parse_spec("none")), Cancelled);
}

// Cancelled as the second strategy is about to be planned: it and the third are not planned, no
// step runs, and the comparison says so (order empty, no round done).
TEST(Measure, ACancellationWhilePlanningStopsBeforeTheNextPlanAndAnyStep) {
    const Graph g = load_network("mlp:depth=6,width=32,batch=16");
    std::atomic<bool> cancel{false};
    EvaluateOptions eo;
    eo.cancel = &cancel;
    Evaluator ev(g, "mlp", eo);
    const Comparison c =
        ev.compare({parse_spec("none"), parse_spec("sqrt-n"), parse_spec("periodic:k=2")},
                   [&](int round, size_t i) {
                       if (round == kPlanningRound && i == 1) cancel = true;
                   });
    EXPECT_TRUE(c.cancelled);
    EXPECT_TRUE(c.order.empty());
    EXPECT_EQ(c.rounds_done, 0);
    ASSERT_EQ(c.strategies.size(), 3u);
    EXPECT_FALSE(c.strategies[0].eval.plan.schedule.code.empty()) << "planned before the cancel";
    for (size_t i = 0; i < 3; ++i) {
        EXPECT_FALSE(c.strategies[i].error) << i << ": a cancel is no error";
        EXPECT_FALSE(c.strategies[i].eval.measured) << i;
    }
    EXPECT_TRUE(c.strategies[2].eval.plan.schedule.code.empty()) << "planned after the cancel";
}

// Profiling the cost model (in the evaluator's constructor) stops on the flag too.
TEST(Measure, ACancellationWhileProfilingStopsTheEvaluator) {
    const Graph g = load_network("mlp:depth=6,width=32,batch=16");
    std::atomic<bool> cancel{true};
    EvaluateOptions eo;
    eo.cancel = &cancel;
    EXPECT_THROW(Evaluator(g, "mlp", eo), Cancelled);
}

TEST(Measure, KeepPartialRoundsKeepsEachStrategysCompletedSteps) {
    const Graph g = load_network("mlp:depth=6,width=32,batch=16");
    // Cancelled as the second strategy of round `round` is about to run: the first has `round`
    // timed steps, the second `round - 1` (none at all when round is 1).
    for (const int round : {1, 2, 3}) {
        SCOPED_TRACE(round);
        std::atomic<bool> cancel{false};
        EvaluateOptions eo;
        eo.repeat = 3;
        eo.cancel = &cancel;
        eo.keep_partial_rounds = true;
        Evaluator ev(g, "mlp", eo);
        const Comparison c =
            ev.compare({parse_spec("none"), parse_spec("sqrt-n")}, [&](int r, size_t i) {
                if (r == round && i == 1) cancel = true;
            });
        EXPECT_TRUE(c.cancelled);
        EXPECT_EQ(c.rounds_done, round - 1);
        const Evaluation& first = c.strategies[0].eval;
        ASSERT_TRUE(first.times);
        ASSERT_TRUE(first.measured);
        EXPECT_EQ(first.times->total.samples, round);
        EXPECT_EQ(first.measured->total_ms, first.times->total.median);
        const Evaluation& second = c.strategies[1].eval;
        EXPECT_FALSE(c.strategies[1].error);
        if (round == 1) {
            EXPECT_FALSE(second.measured) << "no timed step: no measurement";
            EXPECT_FALSE(second.times);
        } else {
            ASSERT_TRUE(second.times);
            EXPECT_EQ(second.times->total.samples, round - 1);
        }
    }
}

}  // namespace
}  // namespace rl
