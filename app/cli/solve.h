#pragma once
// `rematlab-cli solve`: the general rematerialization problem (solvers/general/) on an abstract
// graph file (Checkmate's or Moccasin's benchmark format). Registered from cli_main.cpp with one
// call; the options and the command live in cli/solve.cpp.
#include <functional>

namespace CLI {
class App;
}

namespace rl::cli {

struct SubcommandHandle {
    CLI::App* app = nullptr;
    std::function<int()> run;  // valid after parsing, when app->parsed()
};

SubcommandHandle add_solve_command(CLI::App& app);

}  // namespace rl::cli
