// Polishing a plan for the loads along the interval it serves, not only for their sum.
//
// A plan serves a whole re-plan interval, and step time is set window by window: each window
// waits for its own busiest shard. While the loads drift, a layout balanced for the interval's
// summed load is balanced in its middle only; a shard whose experts all gain is the busiest at the
// end of the interval, one whose experts all lose at its start. The polish takes the loads at a
// few points along the interval (a trajectory: the forecast's start, middle and end, say) and
// swaps replicas between the shards of a layer while the sum over the points of the busiest
// shard's load falls, so that shards end up balanced in level and in slope alike. Swaps stay
// within a node, so node caps and expert groups on nodes hold as the plan had them, and a layer
// moves at most the budget from the current layout (or what the plan itself already moved).
#pragma once

#include <vector>

#include "common/result.hpp"
#include "eplb/layout.hpp"
#include "eplb/load_matrix.hpp"
#include "eplb/planner.hpp"

namespace brigade::eplb {

/// Points along the interval a plan serves that it is polished for (the middles of its halves);
/// adoption is judged on twice as many along the next two intervals.
constexpr int default_trajectory_points = 2;

struct polish_terms {
  /// Nodes the shards are spread over, shards of a node contiguous: swaps stay within a node.
  int nodes = 1;
  /// With a current layout, the polished plan moves at most this fraction of the slots, of each
  /// layer and of the whole layout (or as many as the plan alone moved, when that is more).
  double max_moved_fraction = 0.25;
  /// Swaps per layer, at most: a bound on the work, far above what a layer needs.
  int max_swaps_per_layer = 1000;
};

/// `proposed` with each layer's replicas swapped between shards of a node to lower the sum over
/// `trajectory` ([points][layers][experts], every point of the layout's shape) of each point's
/// busiest shard. Replica counts are unchanged. `current`, when given, bounds the moves; the
/// epoch is proposed's. An empty trajectory returns `proposed` as it is.
result<layout> polish_for_trajectory(const layout& proposed,
                                     const std::vector<load_matrix>& trajectory,
                                     const layout* current, const polish_terms& terms);

/// The planner's plan for `planning` (plan_layout), polished for `trajectory` within the
/// planner's node layout and move budget: what the supervisor and `brigade bench balance
/// --forecast` propose. With an empty trajectory, the plan as it is.
result<layout> plan_for_trajectory(const load_matrix& planning,
                                   const std::vector<load_matrix>& trajectory,
                                   const planner_options& options, const layout* current);

/// The sum over the points of `trajectory` of the layer's busiest shard under `l`, over the sum
/// of the layer's mean shard loads: the layer's mean max/mean along the trajectory.
double trajectory_max_over_mean(const layout& l, const std::vector<load_matrix>& trajectory,
                                int layer);

}  // namespace brigade::eplb
