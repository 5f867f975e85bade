// How evenly a layout spreads a load over the shards, and how far apart two layouts are.
//
// A token routed to an expert with r replicas is spread evenly over them, so each replica carries
// 1/r of the expert's load and a shard's load is the sum over its slots.
//
// Two views of balance are reported. The summed view (balancedness, max_over_mean) adds each
// shard's load over all layers, as the issue defines it. The per-layer view is the one that sets
// step time: every MoE layer is a synchronous all-to-all, so a step waits for the busiest shard of
// each layer in turn, and the step's expert time is proportional to the sum over layers of the
// per-layer maximum. layer_max_over_mean is that sum over the sum of per-layer means: the factor
// by which imbalance stretches the expert part of a step. The planner optimises this view.
#pragma once

#include <vector>

#include "eplb/layout.hpp"
#include "eplb/load_matrix.hpp"

namespace brigade::eplb {

struct balance_report {
  /// Mean over max of the per-shard load summed over layers (1 is perfect).
  double balancedness = 1;
  /// Max over mean of the per-shard load summed over layers (1 / balancedness).
  double max_over_mean = 1;
  /// Sum over layers of the busiest shard's load over the sum of per-layer mean shard loads.
  double layer_max_over_mean = 1;
  /// The worst single layer's max over mean.
  double worst_layer_max_over_mean = 1;
};

/// Per-shard load of one layer under a layout, [shards].
std::vector<double> shard_loads(const layout& l, const load_matrix& load, int layer);

/// The busiest shard over the mean shard of `loads` (1 when they are empty or all zero).
double max_over_mean(const std::vector<double>& loads);

/// Balance of a layout under a load; `load` must match the layout's layers and experts.
balance_report measure_balance(const layout& l, const load_matrix& load);

/// Slots whose expert must be copied in to go from `from` to `to`: for each layer and shard, the
/// experts `to` places there that `from` did not. Order within a shard is free (a shard can
/// renumber its own slots without moving weights), so only the set of experts on a shard counts.
int moved_slots(const layout& from, const layout& to);

}  // namespace brigade::eplb
