// Solver calls in a worker process (solvers/isolated.h, run_in_worker): one worker answers request
// after request, each answer whole; a crash there comes back as a failure that names the signal
// instead of ending the test process, and the next request gets a new worker; an Error keeps its
// message and its worker; a cancel stops a worker that would otherwise run on, or lets one that
// answers SIGINT answer; the watchdog stops one that hangs; one that has left is replaced and an
// idle one leaves; several threads get several workers; an OpenMP parallel region, and OpenBLAS
// started here, run on one thread there; and a MILP solved there gives the optimum, and the same
// answer when asked again after others.
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

// A·x = b for a diagonally dominant A, b = A·1, factorised and solved with OpenBLAS's
// dgetrf/dgetrs: the largest |x - 1| (NaN where there is no OpenBLAS with LAPACK to load).
using SetThreads = void (*)(int);
SetThreads openblas_threads() {
    void* h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_GLOBAL);
    return h ? reinterpret_cast<SetThreads>(dlsym(h, "openblas_set_num_threads")) : nullptr;
}
double openblas_solve() {
    void* h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_GLOBAL);
    if (!h) return std::nan("");
    using Getrf = void (*)(const int*, const int*, double*, const int*, int*, int*);
    using Getrs = void (*)(const char*, const int*, const int*, const double*, const int*,
                           const int*, double*, const int*, int*);
    const auto getrf = reinterpret_cast<Getrf>(dlsym(h, "dgetrf_"));
    const auto getrs = reinterpret_cast<Getrs>(dlsym(h, "dgetrs_"));
    if (!getrf || !getrs) return std::nan("");
    constexpr int n = 300, nrhs = 2;
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
}

// Lets every idle worker go stale (idle for half of kWorkerIdleSeconds: none is asked again), so
// that the next request forks a worker from the process as it is now.
void after_idle_workers() {
    std::this_thread::sleep_for(std::chrono::duration<double>(kWorkerIdleSeconds / 2 + 0.1));
}

// The workers' serve function: the request says what to do.
std::string serve_test(const std::string& request) {
    if (request == "pid") return std::to_string(getpid());
    if (request == "exit7") _exit(7);
    if (request == "graceful") {  // answers SIGINT with what it has, as CBC's handler does
        static volatile sig_atomic_t got = 0;
        got = 0;
        signal(SIGINT, [](int) { got = 1; });
        while (!got) pause();
        return "incumbent";
    }
    if (request == "omp") {
        int threads = 0;
#pragma omp parallel reduction(+ : threads)
        threads += 1;
        return std::to_string(threads);
    }
    if (request == "openblas") return openblas_solve() < 1e-9 ? "solved" : "wrong";
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
    // And one that ends without answering at all.
    EXPECT_EQ(ask("exit7"), "failed: exited with status 7");
    EXPECT_NE(ask("pid"), after);
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
    const std::string third = ask("pid");
    EXPECT_NE(third, after);
    // One that answers SIGINT with what it has (CBC's handler) still answers within its grace,
    // and goes: its solver may still hold the signal.
    stop = false;
    std::thread raiser2([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        stop = true;
    });
    const IsolatedRun graceful = run_in_worker(
        serve_test, "graceful", [&] { return stop.load(); }, 20, 600);
    raiser2.join();
    EXPECT_TRUE(graceful.completed) << graceful.failure;
    EXPECT_TRUE(graceful.cancelled);
    EXPECT_EQ(graceful.answer, "incumbent");
    EXPECT_NE(ask("pid"), third);
}

// A worker has only the thread that forked it while OpenMP's pool is this process's, so a
// parallel region there must run on one thread instead of waiting for the pool: CBC's LAPACK, on
// Debian's OpenMP OpenBLAS, opened one inside Clp and hung every block MILP of ResNet-18 until
// the watchdog. This process's pool is started first, at two threads.
TEST(Worker, AParallelRegionThereRunsOnOneThread) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(2);
    std::atomic<int> started{0};
#pragma omp parallel
    started += 1;
    ASSERT_EQ(started.load(), 2);
    after_idle_workers();
    const auto t0 = std::chrono::steady_clock::now();
    const IsolatedRun r = run_in_worker(serve_test, "omp", nullptr, 0, 10);
    omp_set_num_threads(saved);
    EXPECT_TRUE(r.completed) << r.failure;
    EXPECT_EQ(r.answer, "1");
    EXPECT_LT(seconds_since(t0), 5.0);
}

// CBC's LAPACK is the system's liblapack.so.3: Debian's OpenMP OpenBLAS wherever
// libopenblas0-openmp is installed (scripts/install-deps installs it). With its threads started
// here, its threaded LU solve hung in the child (every block MILP of ResNet-18, inside Clp's
// dense factorization, until the watchdog): there it must run on one thread. Skipped where there
// is no OpenBLAS to load.
TEST(Worker, OpenBlasStartedHereRunsThere) {
    const SetThreads set_threads = openblas_threads();
    if (!set_threads || std::isnan(openblas_solve()))
        GTEST_SKIP() << "no libopenblas.so.0 with LAPACK here";
    set_threads(2);
    ASSERT_LT(openblas_solve(), 1e-9);  // this process's threads start
    after_idle_workers();
    const auto t0 = std::chrono::steady_clock::now();
    const IsolatedRun r = run_in_worker(serve_test, "openblas", nullptr, 0, 10);
    EXPECT_TRUE(r.completed) << r.failure;
    EXPECT_EQ(r.answer, "solved");
    EXPECT_LT(seconds_since(t0), 5.0);
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

// min x + 2y over integers with x + y >= 3.5, x <= 2: the optimum is x = 2, y = 2 (6).
TEST(Worker, AMilpSolvedThereGivesTheOptimum) {
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
