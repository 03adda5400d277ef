#include "solvers/isolated.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <omp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>

#include "engine/errors.h"

namespace rl {

void ByteReader::fail() {
    throw Error("a solver's worker process returned a truncated answer");
}

namespace {

using Clock = std::chrono::steady_clock;

bool g_in_child = false;

// The parent's end of every worker's socket, idle or busy, under g_fork_mutex, which every fork
// here holds: a new child closes them, so that a worker sees the end of its socket when this
// process goes, and a crashed one's end is not held open by its siblings.
std::mutex g_fork_mutex;
std::vector<int> g_worker_fds;

void close_worker_fds() {
    for (int fd : g_worker_fds) ::close(fd);
}

bool crash_injected() {
    const char* inject = std::getenv("REMATLAB_INJECT_SOLVER_CRASH");
    return inject && std::string(inject) == "abort";
}

// MSG_NOSIGNAL: a closed peer is an error here, not a SIGPIPE.
bool write_all(int fd, const std::string& bytes) {
    size_t done = 0;
    while (done < bytes.size()) {
        const ssize_t n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        done += static_cast<size_t>(n);
    }
    return true;
}

bool read_exact(int fd, char* out, size_t size) {
    size_t done = 0;
    while (done < size) {
        const ssize_t n = ::read(fd, out + done, size - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        done += static_cast<size_t>(n);
    }
    return true;
}

// What every child does first.
void enter_child() {
    // A Ctrl-C at the terminal reaches the whole process group: the parent decides what it
    // means (and signals the child itself); the application's handler has no business here.
    // CBC installs its own SIGINT handler during parts of a solve, which still stops it.
    g_in_child = true;
    // Only this thread exists here, while OpenMP's pool is the parent's: a parallel region would
    // wait for its threads forever. CBC's LAPACK is Debian's liblapack.so.3, which is OpenBLAS's
    // OpenMP build wherever libopenblas0-openmp is installed (scripts/install-deps installs it),
    // and its dgetrs went parallel inside Clp: every block MILP of `compare -s optimal` on
    // ResNet-18 hung there until the watchdog stopped it (4 minutes for the plan). One thread
    // for OpenMP, which OpenBLAS's OpenMP build follows, and for OpenBLAS itself where it runs
    // its own threads.
    omp_set_num_threads(1);
    using SetThreads = void (*)(int);
    if (void* f = ::dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))
        reinterpret_cast<SetThreads>(f)(1);
    ::signal(SIGINT, SIG_IGN);
    sigset_t unblock;
    sigemptyset(&unblock);
    sigaddset(&unblock, SIGINT);
    ::pthread_sigmask(SIG_UNBLOCK, &unblock, nullptr);
}

// A worker's messages: the length of what follows (8 bytes), a byte (the request's flags, the
// answer's 'O' or 'E'), then the bytes.
constexpr size_t kHead = sizeof(uint64_t) + 1;
constexpr char kInjectCrash = 1;

std::string framed(char kind, const std::string& body) {
    const uint64_t size = body.size();
    std::string out(kHead, '\0');
    std::memcpy(out.data(), &size, sizeof size);
    out[sizeof size] = kind;
    return out + body;
}

bool whole_frame(const std::string& bytes) {
    if (bytes.size() < kHead) return false;
    uint64_t size = 0;
    std::memcpy(&size, bytes.data(), sizeof size);
    return bytes.size() - kHead == size;
}

[[noreturn]] void worker_main(int fd, Serve serve) {
    enter_child();
    // What one solve freed stays for the next: glibc would give the heap's top back past
    // 128 KB free and map larger blocks afresh, and each page then faults in again.
    ::mallopt(M_TRIM_THRESHOLD, 1 << 30);
    ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
    for (;;) {
        pollfd p{fd, POLLIN, 0};
        const int ready = ::poll(&p, 1, static_cast<int>(kWorkerIdleSeconds * 1000));
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) ::_exit(0);  // idle for kWorkerIdleSeconds
        char head[kHead];
        if (!read_exact(fd, head, kHead)) ::_exit(0);  // the parent has gone
        uint64_t size = 0;
        std::memcpy(&size, head, sizeof size);
        std::string request(static_cast<size_t>(size), '\0');
        if (!read_exact(fd, request.data(), request.size())) ::_exit(0);
        // Fault injection for the tests that hold a solver crash to costing one solve: the
        // worker dies as CBC did in Clp's assertion, before it answers.
        if (head[sizeof size] & kInjectCrash) std::abort();
        std::string answer;
        try {
            answer = framed('O', serve(request));
        } catch (const Error& e) {
            answer = framed('E', e.what());
        } catch (...) {
            ::_exit(3);
        }
        if (!write_all(fd, answer)) ::_exit(0);
    }
}

std::string describe(int status) {
    if (WIFSIGNALED(status)) {
        const int sig = WTERMSIG(status);
        const char* name = ::strsignal(sig);
        return "killed by signal " + std::to_string(sig) + " (" + (name ? name : "?") + ")";
    }
    if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
    return "ended with wait status " + std::to_string(status);
}

struct Awaited {
    std::string bytes;
    bool cancelled = false, timed_out = false;
};

// What worker `pid` writes to `fd`, until a whole frame or the end of the file.
// `cancelled` is polled every 20 ms: when it turns true the child gets SIGINT, and SIGKILL
// `grace_s` later; the watchdog kills it at `watchdog_s` after the start.
Awaited await_child(pid_t pid, int fd, const std::function<bool()>& cancelled, double grace_s,
                    double watchdog_s) {
    Awaited a;
    const auto t0 = Clock::now();
    const auto seconds = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
    double sigint_at = -1;
    bool killed = false;
    char buf[1 << 16];
    for (;;) {
        pollfd p{fd, POLLIN, 0};
        const int ready = ::poll(&p, 1, 20);
        if (ready < 0 && errno != EINTR) break;
        if (ready > 0) {
            const ssize_t n = ::read(fd, buf, sizeof buf);
            if (n > 0) {
                a.bytes.append(buf, static_cast<size_t>(n));
                if (whole_frame(a.bytes)) break;
                continue;
            }
            if (n == 0) break;  // EOF: the child closed its end (answered, or died)
            if (errno != EINTR && errno != EAGAIN) break;
        }
        if (killed) continue;
        const double now = seconds();
        if (!a.cancelled && cancelled && cancelled()) {
            a.cancelled = true;
            sigint_at = now;
            ::kill(pid, SIGINT);
        }
        if ((a.cancelled && now - sigint_at >= grace_s) || now >= watchdog_s) {
            a.timed_out = !a.cancelled;
            ::kill(pid, SIGKILL);
            killed = true;
        }
    }
    return a;
}

// Waits for the child; returns waitpid's result (-1 with ECHILD where the application reaps
// children itself) and its status.
pid_t reap(pid_t pid, int* status) {
    pid_t waited;
    do {
        waited = ::waitpid(pid, status, 0);
    } while (waited < 0 && errno == EINTR);
    return waited;
}

std::string failure_of(const Awaited& a, pid_t waited, int status, double watchdog_s) {
    if (a.timed_out)
        return "still running " + std::to_string(static_cast<int>(watchdog_s)) +
               " s after it started; stopped";
    if (a.cancelled) return "cancelled";
    return waited < 0 ? "ended without an answer" : describe(status);
}

// ---- workers ------------------------------------------------------------------------------------

struct Worker {
    pid_t pid = -1;
    int fd = -1;
    Serve serve = nullptr;
    Clock::time_point idle_since;
};
std::vector<Worker> g_idle;  // under g_fork_mutex

// Stops a worker (it may have stopped already), closes its socket and waits for it.
pid_t retire(const Worker& w, int* status) {
    ::kill(w.pid, SIGKILL);
    {
        const std::lock_guard<std::mutex> lock(g_fork_mutex);
        std::erase(g_worker_fds, w.fd);
        ::close(w.fd);
    }
    return reap(w.pid, status);
}

// An idle worker for `serve`, or a new one (*fresh); pid -1 where none can be started.
Worker take_worker(Serve serve, bool* fresh) {
    std::vector<Worker> stale;
    Worker w;
    {
        const std::lock_guard<std::mutex> lock(g_fork_mutex);
        const auto now = Clock::now();
        // One idle for half of kWorkerIdleSeconds may be leaving as the request arrives.
        const auto old = [&](const Worker& i) {
            return std::chrono::duration<double>(now - i.idle_since).count() >=
                   kWorkerIdleSeconds / 2;
        };
        for (const Worker& i : g_idle)
            if (old(i)) stale.push_back(i);
        g_idle.erase(std::remove_if(g_idle.begin(), g_idle.end(), old), g_idle.end());
        const auto it = std::find_if(g_idle.begin(), g_idle.end(),
                                     [&](const Worker& i) { return i.serve == serve; });
        if (it != g_idle.end()) {
            w = *it;
            g_idle.erase(it);
            *fresh = false;
        } else {
            int sv[2];
            if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0) {
                const pid_t pid = ::fork();
                if (pid == 0) {
                    ::close(sv[0]);
                    close_worker_fds();
                    worker_main(sv[1], serve);
                }
                ::close(sv[1]);
                if (pid < 0) {
                    ::close(sv[0]);
                } else {
                    g_worker_fds.push_back(sv[0]);
                    w = Worker{pid, sv[0], serve, now};
                    *fresh = true;
                }
            }
        }
    }
    int status = 0;
    for (const Worker& s : stale) retire(s, &status);
    return w;
}

}  // namespace

bool in_isolated_child() {
    return g_in_child;
}

IsolatedRun run_in_worker(Serve serve, const std::string& request,
                          const std::function<bool()>& cancelled, double grace_s,
                          double watchdog_s) {
    const std::string message = framed(crash_injected() ? kInjectCrash : 0, request);
    for (int attempt = 0;; ++attempt) {
        bool fresh = false;
        const Worker w = take_worker(serve, &fresh);
        IsolatedRun run;
        if (w.pid < 0) {  // no socket or no fork: here
            run.answer = serve(request);
            run.completed = true;
            return run;
        }
        const bool sent = write_all(w.fd, message);
        const Awaited a =
            sent ? await_child(w.pid, w.fd, cancelled, grace_s, watchdog_s) : Awaited{};
        run.cancelled = a.cancelled;
        run.timed_out = a.timed_out;
        const bool answered = whole_frame(a.bytes);
        if (answered && !a.cancelled) {
            const std::lock_guard<std::mutex> lock(g_fork_mutex);
            g_idle.push_back(Worker{w.pid, w.fd, serve, Clock::now()});
        } else {
            // A cancelled worker goes even when it answered: CBC's SIGINT handler may still
            // hold the signal for its next solve.
            int status = 0;
            const pid_t waited = retire(w, &status);
            // One that left on its own, idle, as the request came: once more, on a new one.
            const bool left = waited < 0 || (WIFEXITED(status) && WEXITSTATUS(status) == 0);
            if (!answered && a.bytes.empty() && !a.cancelled && !a.timed_out && !fresh && left &&
                attempt == 0)
                continue;
            if (!answered) {
                run.failure = failure_of(a, waited, status, watchdog_s);
                return run;
            }
        }
        std::string body = a.bytes.substr(kHead);
        if (a.bytes[sizeof(uint64_t)] == 'E') throw Error(body);
        run.completed = true;
        run.answer = std::move(body);
        return run;
    }
}

QuietStdout::QuietStdout(bool quiet) {
    if (!quiet) return;
    std::fflush(stdout);
    saved_ = ::dup(STDOUT_FILENO);
    const int null_fd = ::open("/dev/null", O_WRONLY);
    if (saved_ >= 0 && null_fd >= 0) ::dup2(null_fd, STDOUT_FILENO);
    if (null_fd >= 0) ::close(null_fd);
}

QuietStdout::~QuietStdout() {
    if (saved_ < 0) return;
    std::fflush(stdout);
    ::dup2(saved_, STDOUT_FILENO);
    ::close(saved_);
}

}  // namespace rl
