// Renumberings of a layer plan's shards. Shards of a fresh plan are interchangeable, so numbering
// them differently keeps the layer's balance while improving something else: overlap with the
// layout in use (fewer slots to move) or the balance of the load summed over layers. Whole nodes
// are renumbered first, then shards within a node, which keeps every placement rule.
#pragma once

#include <cstdint>
#include <vector>

#include "eplb/shard_assignment.hpp"

namespace brigade::eplb {

/// Renumbers the shards of a plan so that it shares as many (shard, expert) pairs with
/// `current_row` as a greedy matching finds, and keeps an expert that stays on a shard in the
/// slot it had there.
std::vector<int32_t> align_to_current(const shard_assignment& plan, const int32_t* current_row);

/// Renumbers the shards of a plan so that its heaviest shards land where `summed_load`, the load
/// of earlier layers, is lightest; adds this layer's load to it.
std::vector<int32_t> align_to_summed_load(const shard_assignment& plan,
                                          std::vector<double>& summed_load);

}  // namespace brigade::eplb
