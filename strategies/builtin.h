#pragma once
// The built-in strategies, registered in one place (registry.cpp). Each lives in its own file.
#include <memory>

#include "strategies/strategy.h"

namespace rl {

std::unique_ptr<Strategy> make_none_strategy();
std::unique_ptr<Strategy> make_sqrt_n_strategy();
std::unique_ptr<Strategy> make_periodic_strategy();
std::unique_ptr<Strategy> make_optimal_strategy();
std::unique_ptr<Strategy> make_min_cut_strategy();
std::unique_ptr<Strategy> make_dtr_strategy();
std::unique_ptr<Strategy> make_revolve_strategy();
std::unique_ptr<Strategy> make_policy_strategy();

}  // namespace rl
