// Solver calls in a child process (solvers/isolated.h): the answer comes back, a crash in the
// child comes back as a failure that names the signal instead of ending the test process, an
// Error keeps its message, a cancel stops a child that would otherwise run on, the watchdog
// stops one that hangs; and a Checkmate MILP solved that way gives what it always gave.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "engine/cancel.h"
#include "engine/errors.h"
#include "solvers/isolated.h"
#include "solvers/milp_model.h"

namespace rl {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(Isolated, TheChildsAnswerComesBackWhole) {
    std::vector<double> big(300000);  // 2.4 MB: more than one pipe buffer
    for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<double>(i) * 0.5;
    const IsolatedRun r = run_isolated(
        [&] {
            ByteWriter w;
            w.put(int32_t{42}).put(true).put_vector(big);
            return w.take();
        },
        nullptr, 0, 60);
    ASSERT_TRUE(r.completed) << r.failure;
    ByteReader in(r.answer);
    EXPECT_EQ(in.get<int32_t>(), 42);
    EXPECT_TRUE(in.get<bool>());
    EXPECT_EQ(in.get_vector<double>(), big);
    // Reading past the end is an error, not a read of whatever follows.
    EXPECT_THROW((void)in.get<int32_t>(), Error);
}

TEST(Isolated, ACrashInTheChildIsAFailureNamingTheSignal) {
    const pid_t self = getpid();
    const IsolatedRun r = run_isolated(
        [&]() -> std::string {
            if (getpid() == self) return "not in a child";
            std::abort();
        },
        nullptr, 0, 60);
    EXPECT_FALSE(r.completed) << r.answer;
    EXPECT_NE(r.failure.find("signal 6"), std::string::npos) << r.failure;
    // And one that ends without answering at all.
    const IsolatedRun quiet = run_isolated(
        [&]() -> std::string {
            if (getpid() == self) return "not in a child";
            _exit(7);
        },
        nullptr, 0, 60);
    EXPECT_FALSE(quiet.completed);
    EXPECT_NE(quiet.failure.find("status 7"), std::string::npos) << quiet.failure;
}

TEST(Isolated, AnErrorKeepsItsMessage) {
    try {
        (void)run_isolated([]() -> std::string { throw Error("the model has no rows"); }, nullptr,
                           0, 60);
        FAIL() << "no Error";
    } catch (const Error& e) {
        EXPECT_STREQ(e.what(), "the model has no rows");
    }
}

TEST(Isolated, ACancelStopsAChildThatWouldRunOn) {
    std::atomic<bool> stop{false};
    std::thread raiser([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        stop = true;
    });
    const auto t0 = std::chrono::steady_clock::now();
    // The child ignores SIGINT (as CBC does outside its own handler): the grace runs out.
    const IsolatedRun r = run_isolated(
        []() -> std::string {
            for (;;) pause();
        },
        [&] { return stop.load(); }, 0.3, 600);
    raiser.join();
    EXPECT_LT(seconds_since(t0), 30);
    EXPECT_FALSE(r.completed);
    EXPECT_TRUE(r.cancelled);
    EXPECT_FALSE(r.timed_out);
    // A child that answers SIGINT with what it has (CBC's handler) still answers.
    stop = false;
    std::thread raiser2([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        stop = true;
    });
    const IsolatedRun graceful = run_isolated(
        []() -> std::string {
            static volatile sig_atomic_t got = 0;
            signal(SIGINT, [](int) { got = 1; });
            while (!got) pause();
            return "incumbent";
        },
        [&] { return stop.load(); }, 20, 600);
    raiser2.join();
    EXPECT_TRUE(graceful.completed) << graceful.failure;
    EXPECT_TRUE(graceful.cancelled);
    EXPECT_EQ(graceful.answer, "incumbent");
}

TEST(Isolated, TheWatchdogStopsAHungChild) {
    const IsolatedRun r = run_isolated(
        []() -> std::string {
            for (;;) pause();
        },
        nullptr, 0, 0.3);
    EXPECT_FALSE(r.completed);
    EXPECT_TRUE(r.timed_out);
    EXPECT_NE(r.failure.find("stopped"), std::string::npos) << r.failure;
}

// min x + 2y over integers with x + y >= 3.5, x <= 2: the optimum is x = 2, y = 2 (6).
TEST(Isolated, AMilpSolvedInAChildGivesTheOptimum) {
    MilpModel m;
    const int x = m.add_col(0, 2, 1, true);
    const int y = m.add_col(0, 10, 2, true);
    m.add_row({{x, 1}, {y, 1}}, 3.5, 1e30);
    MilpSolveOptions o;
    o.time_limit_s = 600;  // a guard
    o.zero_gap = true;
    const MilpResult r = m.solve(o);
    EXPECT_TRUE(r.failure.empty()) << r.failure;
    ASSERT_TRUE(r.has_solution);
    EXPECT_TRUE(r.proven_optimal);
    EXPECT_NEAR(r.objective, 6, 1e-9);
    ASSERT_EQ(r.x.size(), 2u);
    EXPECT_NEAR(r.x[0], 2, 1e-9);
    EXPECT_NEAR(r.x[1], 2, 1e-9);
    EXPECT_LE(r.bound, r.objective + 1e-9);
    // A raised cancel flag throws before anything is solved.
    std::atomic<bool> flag{true};
    const CancelScope scope(&flag);
    EXPECT_THROW((void)m.solve(o), Cancelled);
}

}  // namespace
}  // namespace rl
