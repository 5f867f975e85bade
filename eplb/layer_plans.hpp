// The per-layer plans the planner chooses between: a fresh plan from the loads alone, a repair of
// the current layout, and the re-plan near the current layout that picks among them
// (layer_near.cpp). Internal to the planner and its tests.
#pragma once

#include <cstdint>
#include <vector>

#include "eplb/shard_assignment.hpp"

namespace brigade::eplb {

struct layer_dims {
  int experts = 0;
  int shards = 0;
  int slots_per_shard = 0;
  int nodes = 1;
};

/// A fresh plan stops swapping once its busiest shard is within this fraction of the mean shard
/// load of the lower bound: closer balance is lost in the noise of the next sample window.
constexpr double fresh_plan_tolerance = 1e-3;

/// A fresh plan of one layer from its loads alone; `counts` receives the replica counts.
shard_assignment plan_layer_fresh(const double* load, const layer_dims& dims,
                                  std::vector<int32_t>& counts);

/// What a re-plan near the current layout may leave and spend (see planner_options).
struct near_terms {
  double keep_slack = 0.01;
  double max_moved_fraction = 0.25;
};

/// The plan of one layer that moves the fewest slots from `current_row` while its busiest shard
/// stays within the slack above what a fresh plan reaches, moving at most the budget (never fewer
/// than its replica count changes need).
std::vector<int32_t> plan_layer_near(const double* load, const layer_dims& dims,
                                     const int32_t* current_row, const near_terms& terms);

/// Starts from a current phy2log row, changes replica counts to `counts` (removing surplus
/// replicas, placing new ones in the freed slots), then swaps until the busiest shard is at most
/// `goal` or the swaps would move more than `max_moves` slots in all. Returns false when the
/// counts cannot be placed legally; `out` then holds no useful plan.
bool repair_layer(const double* load, const int32_t* current_row, const int32_t* counts,
                  double goal, int max_moves, shard_assignment& out);

/// Replica counts of a phy2log row.
std::vector<int32_t> replica_counts_of(const int32_t* row, const layer_dims& dims);

/// Slots of `to` whose expert the same shard of `from` does not hold.
int moved_in_layer(const int32_t* from, const int32_t* to, int experts, int shards,
                   int slots_per_shard);

}  // namespace brigade::eplb
