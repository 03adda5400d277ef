// Solver calls in a child process (solvers/isolated.h): the answer comes back, a crash in the
// child comes back as a failure that names the signal instead of ending the test process, an
// Error keeps its message, a cancel stops a child that would otherwise run on, the watchdog
// stops one that hangs, an OpenMP parallel region in the child runs on one thread; and a
// Checkmate MILP solved that way gives what it always gave. The same for the long-lived workers
// (run_in_worker): one answers request after request; a crash, a cancel or the watchdog costs
// one request and the next gets a new worker; one that has left is replaced; an idle one leaves;
// several threads get several workers; and a MILP asked again gets the same answer.
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
#include <fstream>
#include <functional>
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

// ---- workers (run_in_worker) ----------------------------------------------------------------

// The workers' serve functions: the request's first word says what to do.
std::string serve_test(const std::string& request) {
    if (request == "pid") return std::to_string(getpid());
    if (request == "abort") std::abort();
    if (request == "error") throw Error("no such block");
    if (request == "hang")
        for (;;) pause();
    if (request == "leave") {  // answers, then leaves as an idle worker does
        std::thread([] {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            _exit(0);
        }).detach();
        return std::to_string(getpid());
    }
    return "echo " + request;
}

// The state letter of /proc/<pid>/stat ('R', 'S', 'Z', …), or '?' where there is no such process.
char process_state(pid_t pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) return '?';
    const size_t close = line.rfind(')');
    return close != std::string::npos && close + 2 < line.size() ? line[close + 2] : '?';
}

std::string ask(const std::string& request, const std::function<bool()>& cancelled = nullptr,
                double watchdog_s = 60) {
    const IsolatedRun r = run_in_worker(serve_test, request, cancelled, 0, watchdog_s);
    return r.completed ? r.answer : "failed: " + r.failure;
}

TEST(Worker, AnswersRequestInTurnFromOneLongLivedChild) {
    const std::string first = ask("pid");
    ASSERT_EQ(first.find("failed"), std::string::npos) << first;
    EXPECT_NE(first, std::to_string(getpid()));  // not this process
    // The answer is whole however long it is, and the next request goes to the same worker.
    const std::string big(3 << 20, 'x');  // more than a socket's buffer, both ways
    EXPECT_EQ(ask(big), "echo " + big);
    EXPECT_EQ(ask("pid"), first);
}

TEST(Worker, ACrashCostsItsRequestAndTheNextOneGetsANewWorker) {
    const std::string before = ask("pid");
    EXPECT_EQ(ask("abort"), "failed: killed by signal 6 (Aborted)");
    const std::string after = ask("pid");
    EXPECT_EQ(after.find("failed"), std::string::npos) << after;
    EXPECT_NE(after, before);
}

TEST(Worker, AnErrorKeepsItsMessageAndItsWorker) {
    const std::string before = ask("pid");
    try {
        (void)ask("error");
        FAIL() << "no Error";
    } catch (const Error& e) {
        EXPECT_STREQ(e.what(), "no such block");
    }
    EXPECT_EQ(ask("pid"), before);
}

TEST(Worker, ACancelOrTheWatchdogStopsItsWorker) {
    const std::string before = ask("pid");
    std::atomic<bool> stop{false};
    std::thread raiser([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        stop = true;
    });
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(ask("hang", [&] { return stop.load(); }), "failed: cancelled");
    raiser.join();
    EXPECT_LT(seconds_since(t0), 30);
    const std::string after = ask("pid");
    EXPECT_NE(after, before);
    EXPECT_EQ(ask("hang", nullptr, 0.3), "failed: still running 0 s after it started; stopped");
    EXPECT_NE(ask("pid"), after);
}

// A worker that has left (idle, as the request came) costs nothing: the request goes to a new
// one. One idle longer than half of kWorkerIdleSeconds is not asked at all, and has left by
// kWorkerIdleSeconds.
TEST(Worker, OneThatHasLeftIsReplacedAndAnIdleOneLeavesOnItsOwn) {
    const std::string left = ask("leave");
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const std::string next = ask("pid");
    ASSERT_EQ(next.find("failed"), std::string::npos) << next;
    EXPECT_NE(next, left);
    std::this_thread::sleep_for(std::chrono::duration<double>(kWorkerIdleSeconds + 0.5));
    // It has exited (a zombie until the next request reaps it), and is not asked again.
    EXPECT_EQ(process_state(std::stoi(next)), 'Z');
    EXPECT_NE(ask("pid"), next);
    EXPECT_EQ(process_state(std::stoi(next)), '?');  // reaped
}

// Requests from two threads at once go to two workers, each answered.
TEST(Worker, RequestsFromSeveralThreadsAtOnceEachGetAnAnswer) {
    std::vector<std::string> answers(4);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < answers.size(); ++i)
        threads.emplace_back([&, i] { answers[i] = ask(std::string(100000, char('a' + i))); });
    for (std::thread& t : threads) t.join();
    for (size_t i = 0; i < answers.size(); ++i)
        EXPECT_EQ(answers[i], "echo " + std::string(100000, char('a' + i)));
}

// The block MILPs' worker solves one model after another: a model asked again, after others,
// gets the answer it got the first time (nothing of one solve reaches the next), with a node
// limit, which, unlike the clock, stops CBC at the same point every time.
TEST(Worker, AMilpAskedAgainAfterOthersGetsTheSameAnswer) {
    auto knapsack = [](int n, int seed) {
        MilpModel m;
        std::vector<std::pair<int, double>> weight;
        unsigned s = static_cast<unsigned>(seed);
        for (int i = 0; i < n; ++i) {
            s = s * 1103515245u + 12345u;
            const double w = 10 + (s >> 16) % 90, v = w + (s >> 8) % 17;
            weight.emplace_back(m.add_col(0, 1, -v, true), w);
        }
        m.add_row(weight, 0, 25.0 * n);
        return m;
    };
    MilpSolveOptions o;
    o.time_limit_s = 600;
    o.max_nodes = 50;
    const MilpModel a = knapsack(60, 1);
    const MilpResult first = a.solve(o);
    ASSERT_TRUE(first.has_solution) << first.failure;
    for (int seed = 2; seed < 6; ++seed) (void)knapsack(40 + seed, seed).solve(o);
    const MilpResult again = a.solve(o);
    ASSERT_TRUE(again.has_solution) << again.failure;
    EXPECT_EQ(again.x, first.x);
    EXPECT_EQ(again.objective, first.objective);
    EXPECT_EQ(again.bound, first.bound);
}

}  // namespace
}  // namespace rl
