// The per-layer plans the planner chooses between, and the shard renumberings that keep per-layer
// balance while improving stability or the balance summed over layers. Internal to the planner.
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

/// Starts from a current phy2log row, changes replica counts to `counts` (removing surplus
/// replicas, placing new ones in the freed slots), then swaps until the busiest shard is at most
/// `goal`. Returns false when that cannot be done legally; `out` then holds no useful plan.
bool repair_layer(const double* load, const int32_t* current_row, const int32_t* counts,
                  double goal, shard_assignment& out);

/// Replica counts of a phy2log row.
std::vector<int32_t> replica_counts_of(const int32_t* row, const layer_dims& dims);

/// Renumbers the shards of a plan (whole nodes, then shards within a node, which keeps every rule)
/// so that it shares as many (shard, expert) pairs with `current_row` as a greedy matching finds,
/// and keeps an expert that stays on a shard in the slot it had there.
std::vector<int32_t> align_to_current(const shard_assignment& plan, const int32_t* current_row);

/// Renumbers the shards of a plan (the same way) so that its heaviest shards land where
/// `summed_load`, the load of earlier layers, is lightest; adds this layer's load to it.
std::vector<int32_t> align_to_summed_load(const shard_assignment& plan,
                                          std::vector<double>& summed_load);

/// Slots of `to` whose expert the same shard of `from` does not hold.
int moved_in_layer(const int32_t* from, const int32_t* to, int experts, int shards,
                   int slots_per_shard);

}  // namespace brigade::eplb
