// Node-aware numbering of a proposed layout's shards. Within a layer, shards of a plan are
// interchangeable for balance (each layer waits for its own busiest shard), so the supervisor may
// give each planned shard's experts to whichever physical shard makes the migration cheapest: an
// expert a shard keeps costs nothing, a copy from a shard of the same node costs 1, a copy from
// another node costs `cross_node_cost` (it crosses the network). Each layer is an assignment
// problem, solved exactly (Hungarian method); the numbering the planner chose wins ties.
#pragma once

#include <vector>

#include "eplb/layout.hpp"

namespace brigade::eplb {

/// What moving from one layout to another copies.
struct move_cost {
  int moved_slots = 0;   ///< Slots whose expert changes.
  int within_node = 0;   ///< Experts copied in from a shard of the same node.
  int across_nodes = 0;  ///< Experts copied in from another node.
  double units = 0;      ///< within_node + cross_node_cost * across_nodes.
};

/// The copies from `current` to `proposed` when shard s runs on node shard_node[s] (empty: every
/// shard on one node). An expert new to a shard is copied once, from its node when it can be.
move_cost measure_moves(const layout& current, const layout& proposed,
                        const std::vector<int>& shard_node, double cross_node_cost);

/// `proposed` with each layer's shards renumbered to minimise the units of copying from
/// `current`, and an expert that stays on a shard kept in the slot it had. Same shape, epoch and
/// per-layer balance as `proposed`.
layout align_to_nodes(const layout& current, const layout& proposed,
                      const std::vector<int>& shard_node, double cross_node_cost);

}  // namespace brigade::eplb
