#include "solvers/isolated.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <omp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <exception>

#include "engine/errors.h"

namespace rl {

void ByteReader::fail() {
    throw Error("a solver's child process returned a truncated answer");
}

namespace {

bool g_in_child = false;

// The child's answer: 'O' and work()'s bytes, or 'E' and an Error's message.
void write_all(int fd, const std::string& bytes) {
    size_t done = 0;
    while (done < bytes.size()) {
        const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        done += static_cast<size_t>(n);
    }
}

[[noreturn]] void child_main(int fd, const std::function<std::string()>& work) {
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
    // Fault injection for the tests that hold a solver crash to costing one solve: the child
    // dies as CBC did in Clp's assertion, before it answers.
    if (const char* inject = std::getenv("REMATLAB_INJECT_SOLVER_CRASH");
        inject && std::string(inject) == "abort")
        std::abort();
    int status = 0;
    try {
        write_all(fd, "O" + work());
    } catch (const Error& e) {
        write_all(fd, std::string("E") + e.what());
    } catch (const std::exception& e) {
        write_all(fd, std::string("E") + e.what());
        status = 3;
    } catch (...) {
        status = 3;
    }
    ::close(fd);
    // No exit(): no atexit handlers, static destructors or stdio flushes of the parent's state.
    ::_exit(status);
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

}  // namespace

bool in_isolated_child() {
    return g_in_child;
}

IsolatedRun run_isolated(const std::function<std::string()>& work,
                         const std::function<bool()>& cancelled, double grace_s,
                         double watchdog_s) {
    IsolatedRun run;
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
        run.answer = work();  // no pipe, no child: the solve runs here, as it used to
        run.completed = true;
        return run;
    }
    const pid_t pid = ::fork();
    if (pid < 0) {
        ::close(fds[0]);
        ::close(fds[1]);
        run.answer = work();
        run.completed = true;
        return run;
    }
    if (pid == 0) {
        ::close(fds[0]);
        child_main(fds[1], work);
    }
    ::close(fds[1]);
    using Clock = std::chrono::steady_clock;
    const auto t0 = Clock::now();
    const auto seconds = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
    std::string bytes;
    double sigint_at = -1;
    bool killed = false;
    char buf[1 << 16];
    for (;;) {
        pollfd p{fds[0], POLLIN, 0};
        const int ready = ::poll(&p, 1, 20);
        if (ready < 0 && errno != EINTR) break;
        if (ready > 0) {
            const ssize_t n = ::read(fds[0], buf, sizeof buf);
            if (n > 0) {
                bytes.append(buf, static_cast<size_t>(n));
                continue;
            }
            if (n == 0) break;  // EOF: the child closed its end (answered, or died)
            if (errno != EINTR && errno != EAGAIN) break;
        }
        if (killed) continue;
        const double now = seconds();
        if (!run.cancelled && cancelled && cancelled()) {
            run.cancelled = true;
            sigint_at = now;
            ::kill(pid, SIGINT);
        }
        if ((run.cancelled && now - sigint_at >= grace_s) || now >= watchdog_s) {
            run.timed_out = !run.cancelled;
            ::kill(pid, SIGKILL);
            killed = true;
        }
    }
    ::close(fds[0]);
    int status = 0;
    pid_t waited;
    do {
        waited = ::waitpid(pid, &status, 0);
    } while (waited < 0 && errno == EINTR);
    // ECHILD (the application reaps children itself): judge by the answer alone.
    const bool exited_cleanly = waited < 0 || (WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (!bytes.empty() && bytes[0] == 'E' && exited_cleanly) throw Error(bytes.substr(1));
    if (!bytes.empty() && bytes[0] == 'O' && exited_cleanly) {
        run.completed = true;
        run.answer = bytes.substr(1);
        return run;
    }
    if (run.timed_out)
        run.failure = "still running " + std::to_string(static_cast<int>(watchdog_s)) +
                      " s after it started; stopped";
    else if (run.cancelled)
        run.failure = "cancelled";
    else
        run.failure = waited < 0 ? "ended without an answer" : describe(status);
    return run;
}

}  // namespace rl
