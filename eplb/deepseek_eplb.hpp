// The published expert-parallelism load balancer of DeepSeek (EPLB), implemented here from its
// description as the baseline the planner is measured against.
//
// Global policy, per layer: every expert gets one replica, then each remaining slot goes to the
// expert with the highest load per replica; the replicas are then packed heaviest first, each onto
// the least loaded shard that still has a free slot. Hierarchical policy, used when nodes > 1:
// the expert groups (by their summed load) are first packed onto nodes the same way (an equal
// number per node), then each node's experts are replicated within it and its replicas packed
// onto its shards. Given groups (expert_groups > 0), nodes > 1 must place them as the planner's
// groups_per_node does, or the call fails; without, each expert is its own group, and the global
// policy stands in when the nodes do not divide the experts.
//
// Two deviations keep its output a legal layout: no expert gets more replicas than there are
// shards to hold them, and a replica never goes to a shard that already holds its expert (when
// every shard with room does, an expert moves from a full shard into the free slot first). The
// heuristic is stateless: it ignores the current layout.
#pragma once

#include "common/result.hpp"
#include "eplb/layout.hpp"
#include "eplb/load_matrix.hpp"

namespace brigade::eplb {

/// Plans a layout for `load` with the heuristic; errors on the same invalid input as the planner.
/// `expert_groups` are the router's groups (contiguous experts, see expert_groups.hpp); 0: each
/// expert its own group.
result<layout> plan_deepseek_eplb(const load_matrix& load, int shards, int slots_per_shard,
                                  int nodes, int expert_groups = 0);

}  // namespace brigade::eplb
