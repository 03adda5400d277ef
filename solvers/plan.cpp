#include "solvers/plan.h"

namespace rl {

const char* plan_status_name(PlanStatus s) {
    switch (s) {
        case PlanStatus::Optimal:
            return "optimal";
        case PlanStatus::Feasible:
            return "feasible";
        case PlanStatus::Heuristic:
            return "heuristic";
        case PlanStatus::Infeasible:
            return "infeasible";
    }
    return "?";
}

}  // namespace rl
