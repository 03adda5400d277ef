#pragma once
// Solver calls run in a child process, so that a crash inside the solver library costs that
// one solve, not the application. COIN-OR CBC 2.10 (Debian) has aborted inside Clp during a
// `compare` on ResNet-50 and crashed in CglPreProcess::postProcess when a time limit stopped its
// preprocessing, both on valid models; in-process, either ends the CLI or the desktop app.
//
//   IsolatedRun r = run_in_worker(&serve_milp, encode(model), [] { return cancel_requested(); },
//                                 /*grace_s=*/0, /*watchdog_s=*/90);
//   if (!r.completed) report("the MILP solver failed: " + r.failure);   // e.g. "killed by
//   else use(decode(r.answer));                                         //  signal 6 (Aborted)"
//
// The child is a worker: a fork of this process that answers requests one at a time, for as
// long as they come. A plan's block MILPs are hundreds of small solves, most under a millisecond
// of CBC; a fork per solve cost more than the solve (2.5 MB of fresh pages each, a page fault
// apiece: 15 ms a solve on these machines, 13 of the 23 s of the explanation test's 854 solves).
// Only the forking thread exists in a worker, so `serve` must not wait on a lock another thread
// may hold (malloc's are fork-safe in glibc; Qt and iostreams under other threads' use are not
// to be touched); OpenMP, and OpenBLAS under CBC's LAPACK, are set to one thread there. A worker
// runs `serve` as the fork saw this process, so `serve` is a plain function of the request's
// bytes, and whatever it needs travels in them. Its answer comes back through a socket; an
// rl::Error it throws is thrown again here with the same message (and the worker stays). While
// it works, `cancelled` is polled every 20 ms: when it returns true the worker is sent SIGINT
// (CBC's own handler then stops the search, and the worker still answers with its incumbent) and
// given `grace_s` seconds before SIGKILL; a cancelled worker goes, answered or not (CBC's handler
// may still hold the signal). One still working `watchdog_s` seconds after the request is killed
// too (a solver that ignores its own time limit, or a hang). A killed or crashed worker costs its
// request only: the next forks another. One left idle for kWorkerIdleSeconds leaves on its own
// (the pages it shares with this process are then this process's alone again); a request never
// goes to one idle for half of that. Requests from several threads at once go to as many
// workers. Where no worker can be started, `serve` runs here. With
// REMATLAB_INJECT_SOLVER_CRASH=abort in the environment every worker aborts before it answers
// (the tests' fault injection).
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

namespace rl {

struct IsolatedRun {
    bool completed = false;  // the worker returned its answer
    bool cancelled = false;  // `cancelled` returned true while it ran
    bool timed_out = false;  // killed by the watchdog
    std::string answer;      // what `serve` returned (completed)
    std::string failure;     // why there is no answer: "killed by signal 11 (Segmentation fault)"
};

using Serve = std::string (*)(const std::string& request);
constexpr double kWorkerIdleSeconds = 2.0;
IsolatedRun run_in_worker(Serve serve, const std::string& request,
                          const std::function<bool()>& cancelled, double grace_s,
                          double watchdog_s);

// True inside a worker (`serve` may then change process-wide state such as its stdout, which a
// run here, where no worker could be started, must leave alone).
bool in_isolated_child();

// Points stdout at /dev/null while it lives, when `quiet` (CBC's preprocessing prints there
// whatever its log level, and the CLI's --json output must stay clean), and back after.
class QuietStdout {
  public:
    explicit QuietStdout(bool quiet);
    ~QuietStdout();
    QuietStdout(const QuietStdout&) = delete;
    QuietStdout& operator=(const QuietStdout&) = delete;

  private:
    int saved_ = -1;
};

// The answer's bytes: trivially copyable values and vectors of them, read back in the order
// written. Both ends are the same binary, so no byte order or layout is negotiated.
class ByteWriter {
  public:
    template <class T>
    ByteWriter& put(const T& v) {
        static_assert(std::is_trivially_copyable_v<T>);
        const auto* p = reinterpret_cast<const char*>(&v);
        bytes_.append(p, sizeof(T));
        return *this;
    }
    template <class T>
    ByteWriter& put_vector(const std::vector<T>& v) {
        static_assert(std::is_trivially_copyable_v<T>);
        put(static_cast<uint64_t>(v.size()));
        if (!v.empty())
            bytes_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
        return *this;
    }
    std::string take() { return std::move(bytes_); }

  private:
    std::string bytes_;
};

class ByteReader {
  public:
    explicit ByteReader(const std::string& bytes) : bytes_(bytes) {}
    template <class T>
    T get() {
        static_assert(std::is_trivially_copyable_v<T>);
        T v{};
        need(sizeof(T));
        std::memcpy(&v, bytes_.data() + at_, sizeof(T));
        at_ += sizeof(T);
        return v;
    }
    template <class T>
    std::vector<T> get_vector() {
        const auto n = get<uint64_t>();
        if (n > (bytes_.size() - at_) / sizeof(T)) fail();
        std::vector<T> v(static_cast<size_t>(n));
        if (n) std::memcpy(v.data(), bytes_.data() + at_, static_cast<size_t>(n) * sizeof(T));
        at_ += static_cast<size_t>(n) * sizeof(T);
        return v;
    }

  private:
    void need(size_t n) const {
        if (n > bytes_.size() - at_) fail();
    }
    [[noreturn]] static void fail();
    const std::string& bytes_;
    size_t at_ = 0;
};

}  // namespace rl
