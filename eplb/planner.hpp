// The expert-placement planner: a pure function from measured loads (and the layout in use) to a
// new layout. No actors, no I/O; the supervisor calls it every re-plan interval and decides with
// judge_adoption (adoption.hpp) whether to migrate.
//
// Per layer it computes a fresh plan: replica counts that minimise the largest per-replica load,
// a heaviest-first packing, then swaps that lower the busiest shard until no single swap helps.
// Without a current layout, each layer's shards are then renumbered so that the per-shard load
// summed over layers is even too. With a current layout, the planner instead looks for the layout
// that moves the fewest slots while staying within `keep_slack` of the fresh plan's busiest shard:
// the current layout repaired by swaps, the same with the fresh replica counts, or the fresh plan
// renumbered to overlap the current one as much as possible.
#pragma once

#include "common/result.hpp"
#include "eplb/layout.hpp"
#include "eplb/load_matrix.hpp"

namespace brigade::eplb {

struct planner_options {
  int shards = 0;           ///< Expert shards.
  int slots_per_shard = 0;  ///< Physical expert slots per shard (from the manifest).
  /// Nodes the shards are spread over, shards of a node contiguous; must divide `shards`. With
  /// more than one, no node holds more than ceil(r / nodes) of an expert's r replicas.
  int nodes = 1;
  /// With a current layout, a layer keeps as many slots as it can while its busiest shard stays
  /// within this fraction of its mean shard load above the fresh plan's busiest shard.
  double keep_slack = 0.01;
};

/// Plans a layout for `load` ([layers][experts]). `current`, when given, must have the same shape;
/// the new layout then carries its epoch + 1, and otherwise epoch 0. Invalid input (bad loads,
/// shapes that cannot hold a layout, nodes that do not divide shards) returns an error.
result<layout> plan_layout(const load_matrix& load, const planner_options& options,
                           const layout* current);

/// Checks loads, options and the current layout's shape the way plan_layout does.
status validate_plan_input(const load_matrix& load, const planner_options& options,
                           const layout* current);

}  // namespace brigade::eplb
