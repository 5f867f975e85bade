// Expert groups of group-limited routing (DeepSeek-V3's n_group) and the nodes they live on.
//
// A router with groups splits a layer's E experts into G equal groups of contiguous experts
// (group g holds experts [g * E / G, (g + 1) * E / G)); each token picks its topk_group best
// groups, then its top-k experts inside them. A layout that keeps every replica of a group's
// experts on one node therefore sends each token to at most topk_group nodes. Nodes are blocks of
// contiguous shards, shards / nodes each, as everywhere in eplb.
#pragma once

#include <vector>

#include "common/result.hpp"
#include "eplb/layout.hpp"

namespace brigade::eplb {

/// The shape of a grouped placement; the counts must divide as validate_expert_groups says.
struct group_dims {
  int experts = 0;
  int groups = 1;
  int nodes = 1;
  int shards = 0;
  int slots_per_shard = 0;

  int experts_per_group() const { return experts / groups; }
  int groups_per_node() const { return groups / nodes; }
  int shards_per_node() const { return shards / nodes; }
  int node_slots() const { return shards_per_node() * slots_per_shard; }
  int group_of(int expert) const { return expert / experts_per_group(); }
};

/// Checks that `expert_groups` splits `experts` into equal groups, and, with `per_node`, that
/// whole groups can be placed on `nodes` nodes: more than one node, the same number of groups on
/// each, and no more slots on a shard than the experts of one node (a shard holds an expert once).
/// The error names the option at fault; `nodes` must already divide `shards`.
status validate_expert_groups(int experts, int shards, int slots_per_shard, int nodes,
                              int expert_groups, bool per_node);

/// The node that holds every replica of each group's experts in one layer of `l`, or -1 for a
/// group whose replicas are on more than one node.
std::vector<int> group_nodes_of(const layout& l, int layer, int nodes, int expert_groups);

/// Whether every layer of `l` keeps each group's replicas on one node.
bool groups_stay_on_nodes(const layout& l, int nodes, int expert_groups);

}  // namespace brigade::eplb
