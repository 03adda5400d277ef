#pragma once
// One event of a measured memory timeline (engine/allocator.h records them; a cap failure carries
// those measured before it, engine/errors.h).
#include <cstdint>

namespace rl {

struct TimelinePoint {
    double time_ms;       // since the allocator's epoch (the executor: since the step began)
    uint64_t bytes;       // live bytes after this event
    int32_t instruction;  // -1 for events before the first instruction / after the last
};

}  // namespace rl
