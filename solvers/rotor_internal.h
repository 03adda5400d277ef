#pragma once
// The pieces of solvers/rotor.cpp that solvers/rockmate.cpp builds on: a chain's stages and the
// engine-exact peak of a piece of a schedule. Not part of the solvers' public interface.
#include <cstdint>
#include <vector>

#include "engine/graph.h"
#include "engine/liveness.h"
#include "engine/schedule.h"

namespace rl::rotor_detail {

struct StageNodes {
    NodeId first, last;  // inclusive
    bool is_loss_stage;
};

// The stages of `g`, cut at segment_boundaries (rotor.h, THE CHAIN).
std::vector<StageNodes> stages_of(const Graph& g, std::vector<NodeId>* stage_first);

// Values the stage's backwards read (residuals), graph inputs excluded.
std::vector<ValueId> backward_reads(const Graph& g, const LivenessTables& t, StageNodes st);

// The peak live bytes of a piece of a schedule (rotor.cpp states what it counts): `acts` live
// at its start, backwards of nodes >= `backwards_done_from` done, `kept` read after it.
uint64_t walk_peak(const Graph& g, const LivenessTables& t, const std::vector<ValueId>& acts,
                   NodeId backwards_done_from, const std::vector<Instruction>& seq,
                   const std::vector<ValueId>& kept);

std::vector<Instruction> computes(const std::vector<NodeId>& nodes);

}  // namespace rl::rotor_detail
