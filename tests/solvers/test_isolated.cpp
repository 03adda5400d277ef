// Solver calls in a child process (solvers/isolated.h): the answer comes back, a crash in the
// child comes back as a failure that names the signal instead of ending the test process, an
// Error keeps its message, a cancel stops a child that would otherwise run on, the watchdog
// stops one that hangs, an OpenMP parallel region in the child runs on one thread; and a
// Checkmate MILP solved that way gives what it always gave.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <omp.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

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

// The child has only the calling thread while OpenMP's pool is the parent's, so a parallel
// region there must run on one thread instead of waiting for the pool: CBC's LAPACK, on
// Debian's OpenMP OpenBLAS, opened one inside Clp and hung every block MILP of ResNet-18 until
// the watchdog. The parent's pool is started first, at two threads.
TEST(Isolated, AParallelRegionInTheChildRunsOnOneThread) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(2);
    std::atomic<int> started{0};
#pragma omp parallel
    started += 1;
    ASSERT_EQ(started.load(), 2);
    const auto t0 = std::chrono::steady_clock::now();
    const IsolatedRun r = run_isolated(
        [] {
            int threads = 0;
#pragma omp parallel reduction(+ : threads)
            threads += 1;
            return std::to_string(threads);
        },
        nullptr, 0, 10);
    omp_set_num_threads(saved);
    EXPECT_TRUE(r.completed) << r.failure;
    EXPECT_EQ(r.answer, "1");
    EXPECT_LT(seconds_since(t0), 5.0);
}

// CBC's LAPACK is the system's liblapack.so.3: Debian's OpenMP OpenBLAS wherever
// libopenblas0-openmp is installed (scripts/install-deps installs it). With its threads started
// in the parent, its threaded LU solve hung in the child (every block MILP of ResNet-18, inside
// Clp's dense factorization, until the watchdog): there it must run on one thread. The solve
// itself: A·x = b for a diagonally dominant A, factorised and solved with dgetrf/dgetrs.
// Skipped where there is no OpenBLAS to load.
TEST(Isolated, OpenBlasStartedInTheParentRunsInTheChild) {
    void* h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_GLOBAL);
    if (!h) GTEST_SKIP() << "no libopenblas.so.0 here: " << dlerror();
    using Getrf = void (*)(const int*, const int*, double*, const int*, int*, int*);
    using Getrs = void (*)(const char*, const int*, const int*, const double*, const int*,
                           const int*, double*, const int*, int*);
    using SetThreads = void (*)(int);
    const auto getrf = reinterpret_cast<Getrf>(dlsym(h, "dgetrf_"));
    const auto getrs = reinterpret_cast<Getrs>(dlsym(h, "dgetrs_"));
    const auto set_threads = reinterpret_cast<SetThreads>(dlsym(h, "openblas_set_num_threads"));
    if (!getrf || !getrs || !set_threads) GTEST_SKIP() << "libopenblas.so.0 without LAPACK";
    constexpr int n = 300, nrhs = 2;
    auto solve = [&] {  // x with A·x = b, b = A·1: x should be all ones
        std::vector<double> a(n * n), b(n * nrhs, 0.0);
        for (int i = 0; i < n; ++i)
            for (int j = 0; j < n; ++j) a[j * n + i] = i == j ? n : 1.0 / (1 + i + j);
        for (int r = 0; r < nrhs; ++r)
            for (int i = 0; i < n; ++i)
                for (int j = 0; j < n; ++j) b[r * n + i] += a[j * n + i];
        std::vector<int> piv(n);
        int info = 0;
        getrf(&n, &n, a.data(), &n, piv.data(), &info);
        getrs("N", &n, &nrhs, a.data(), &n, piv.data(), b.data(), &n, &info);
        double worst = 0;
        for (double x : b) worst = std::max(worst, std::abs(x - 1.0));
        return worst;
    };
    set_threads(2);
    ASSERT_LT(solve(), 1e-9);  // the parent's threads start
    const auto t0 = std::chrono::steady_clock::now();
    const IsolatedRun r = run_isolated(
        [&] { return std::string(solve() < 1e-9 ? "solved" : "wrong"); }, nullptr, 0, 10);
    EXPECT_TRUE(r.completed) << r.failure;
    EXPECT_EQ(r.answer, "solved");
    EXPECT_LT(seconds_since(t0), 5.0);
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
