#pragma once
// Running the built rematlab-cli as a child process, for the end-to-end CLI tests: a fixture with
// a temporary directory, run (wait for the exit), start/finish (run in the background, stop it
// after a limit), interrupt (Ctrl-C and how long it took to stop), and small file helpers.
// REMATLAB_CLI_PATH is set by tests/CMakeLists.txt; the REMATLAB_CLI variable overrides it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "engine/test_util.h"

namespace rl::test {

namespace fs = std::filesystem;

struct CliResult {
    int code = -1;  // exit status; 128 + signal number when killed by a signal
    bool signaled = false;
    std::string out, err;
};

inline void write_file(const fs::path& p, const std::string& text) {
    std::ofstream out(p, std::ios::binary);
    out << text;
}

// The non-empty lines of `text`.
inline std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
        if (!line.empty()) lines.push_back(line);
    return lines;
}

class CliProcessTest : public ::testing::Test {
  protected:
    void SetUp() override {
        const char* cli = std::getenv("REMATLAB_CLI");
        cli_ = cli ? cli : REMATLAB_CLI_PATH;
        ASSERT_TRUE(fs::exists(cli_)) << cli_;
        std::string tmpl = (fs::temp_directory_path() / "rematlab-cli-test-XXXXXX").string();
        ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
        dir_ = tmpl;
    }
    void TearDown() override {
        std::error_code ec;
        if (!dir_.empty()) fs::remove_all(dir_, ec);
    }

    // Runs the CLI with `args` to its end; stdout and stderr go to files in the temp dir (no pipe
    // deadlock), stdin is /dev/null.
    CliResult run(const std::vector<std::string>& args) {
        const pid_t pid = start(args, "", /*own_session=*/false);
        int status = 0;
        if (pid < 0 || waitpid(pid, &status, 0) != pid) return {};
        return result_of(status);
    }

    // Starts the CLI with `args` and returns at once: stdout goes to dir_/stdout.txt; stderr to
    // dir_/stderr.txt, or to the terminal `stderr_tty` names (where the progress bar draws). In
    // its own session by default, so that the terminal is only its stderr.
    pid_t start(const std::vector<std::string>& args, const std::string& stderr_tty = "",
                bool own_session = true) {
        const fs::path out_path = dir_ / "stdout.txt", err_path = dir_ / "stderr.txt";
        std::vector<std::string> copy = args;
        std::vector<char*> argv{cli_.data()};
        for (auto& a : copy) argv.push_back(a.data());
        argv.push_back(nullptr);
        const pid_t pid = fork();
        if (pid == 0) {
            if (own_session) setsid();
            const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            const int err = stderr_tty.empty()
                                ? open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644)
                                : open(stderr_tty.c_str(), O_RDWR | O_NOCTTY);
            const int in = open("/dev/null", O_RDONLY);
            if (out < 0 || err < 0 || in < 0) _exit(126);
            dup2(in, STDIN_FILENO);
            dup2(out, STDOUT_FILENO);
            dup2(err, STDERR_FILENO);
            execv(argv[0], argv.data());
            _exit(127);
        }
        return pid;
    }

    // Waits up to `limit` for `pid` to end; kills it when it does not (code -1).
    CliResult finish(pid_t pid, std::chrono::milliseconds limit) {
        int status = 0;
        const auto deadline = std::chrono::steady_clock::now() + limit;
        pid_t done = 0;
        while ((done = waitpid(pid, &status, WNOHANG)) == 0 &&
               std::chrono::steady_clock::now() < deadline)
            usleep(5000);
        if (done != pid) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            CliResult r;
            r.out = rl::testing::read_bytes(dir_ / "stdout.txt");
            return r;
        }
        return result_of(status);
    }

    // Sends Ctrl-C (SIGINT) to `pid` and waits up to `limit` for it to end: its result, and the
    // seconds it took to stop.
    std::pair<CliResult, double> interrupt(pid_t pid, std::chrono::milliseconds limit) {
        const auto sent = std::chrono::steady_clock::now();
        if (kill(pid, SIGINT) != 0) ADD_FAILURE() << "kill(SIGINT) failed";
        CliResult r = finish(pid, limit);
        return {std::move(r),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count()};
    }

    std::string cli_;
    fs::path dir_;

  private:
    CliResult result_of(int status) const {
        CliResult r;
        if (WIFEXITED(status)) {
            r.code = WEXITSTATUS(status);
        } else if (WIFSIGNALED(status)) {
            r.signaled = true;
            r.code = 128 + WTERMSIG(status);
        }
        r.out = rl::testing::read_bytes(dir_ / "stdout.txt");
        r.err = rl::testing::read_bytes(dir_ / "stderr.txt");
        return r;
    }
};

}  // namespace rl::test
