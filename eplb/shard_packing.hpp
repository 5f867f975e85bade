// The steps the planner builds a layer from: replica counts, a greedy first packing, a packing
// that always succeeds, and a local search that evens out the busiest shard.
#pragma once

#include <cstdint>

#include "eplb/shard_assignment.hpp"

namespace brigade::eplb {

/// Gives each expert one replica, then hands the remaining slots out one by one to the expert
/// with the highest load per replica that has fewer than `max_per_expert` replicas. This is
/// optimal for the largest per-replica load, the one item the packing can never split.
void allocate_replicas(const double* load, int experts, int slots, int max_per_expert,
                       int32_t* counts);

/// Places one replica of `expert` on the least loaded shard it fits on. When every shard with a
/// free slot already holds the expert, moves one expert from a shard that can take `expert` into
/// a free slot elsewhere first. Returns false when neither works.
bool place_replica(shard_assignment& a, int expert);

/// Packs every replica of an empty assignment heaviest first onto the least loaded shard it fits
/// on. Returns false if a replica found no legal place; the assignment is then incomplete.
bool pack_heaviest_first(shard_assignment& a);

/// Packs every replica of an empty assignment so that all rules hold, whatever the counts: the
/// replicas, grouped by expert, are dealt to shards in an order that cycles through the nodes.
/// Balance is left to improve_by_swaps.
void pack_round_robin(shard_assignment& a);

/// Lowers the busiest shard's load by swapping one of its replicas with a lighter one on another
/// shard, lightest shards tried first, until the busiest shard is at most `goal`, no swap helps,
/// or `max_swaps` swaps were made. Returns the number of swaps.
int improve_by_swaps(shard_assignment& a, double goal, int max_swaps);

/// The least load the busiest shard can have: the mean shard load or the largest replica.
double busiest_shard_lower_bound(const shard_assignment& a);

}  // namespace brigade::eplb
