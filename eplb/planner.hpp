// The expert-placement planner: a pure function from measured loads (and the layout in use) to a
// new layout. No actors, no I/O; the supervisor calls it every re-plan interval and decides with
// judge_adoption (adoption.hpp) whether to migrate.
//
// Balance is judged per layer: every MoE layer is a synchronous all-to-all, so a step waits for
// each layer's busiest shard (see balance_metrics.hpp). A fresh plan of a layer gives replicas to
// the experts with the highest load per replica (optimal for the largest replica), packs them
// heaviest first onto the least loaded shard with room, then swaps replicas between the busiest
// shard and lighter ones until it is within 0.1% of the mean load of the lower bound or no swap
// helps. When replicas are too coarse for swaps (many just over half a shard's share), it trades
// replicas between experts and repacks, keeping only changes that help. Without a current layout,
// each layer's shards are then renumbered so that the load summed over layers is even as well.
//
// With a current layout, a layer whose busiest shard is within `keep_slack` of the best balance
// stays as it is. Otherwise the planner repairs it (new replica counts, heaviest new replicas onto
// the lightest shards, then swaps) down to the middle of the slack, so that drift does not push it
// straight back, moving at most `max_moved_fraction` of its slots; the fresh plan, renumbered to
// overlap the current layout, is the fallback when repairs fall short.
//
// With `groups_per_node` (group-limited routing, see expert_groups.hpp), every replica of a
// group's experts stays on one node: whole groups are packed onto nodes by load, the same number
// on each, and each node's part of the layer is then planned as above, as a layer of its own. With
// a current layout, groups stay on their nodes while the heaviest node is within `keep_slack` of a
// fresh packing's; otherwise groups swap nodes (down to the middle of the slack), the slots they
// held counting in the move budget, and each node is repaired with what the budget has left. A
// current layout that spreads groups over nodes is first brought to one node per group, moving
// what that needs whatever the budget.
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
  /// With a current layout, at most this fraction of each layer's slots moves in one plan (never
  /// fewer than the replica count changes need); a larger change takes several plans.
  double max_moved_fraction = 0.25;
  /// Expert groups of the model's router (n_group): group g holds the experts
  /// [g * E / G, (g + 1) * E / G). Must divide the experts; read only with groups_per_node.
  int expert_groups = 1;
  /// Keeps every replica of a group's experts on one node, so that a token of a group-limited
  /// router touches at most topk_group nodes. Needs nodes > 1, expert_groups divisible by nodes
  /// and slots_per_shard at most experts / nodes; the node caps above then do not apply.
  bool groups_per_node = false;
};

/// Plans a layout for `load` ([layers][experts]). `current`, when given, must have the same shape;
/// the new layout then carries its epoch + 1, and otherwise epoch 0. Invalid input (bad loads,
/// shapes that cannot hold a layout, nodes that do not divide shards, groups that cannot be
/// placed) returns an error naming the option at fault.
result<layout> plan_layout(const load_matrix& load, const planner_options& options,
                           const layout* current);

/// Checks loads, options and the current layout's shape the way plan_layout does.
status validate_plan_input(const load_matrix& load, const planner_options& options,
                           const layout* current);

}  // namespace brigade::eplb
