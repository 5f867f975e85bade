// The steps the planner places expert groups with when each group's replicas must stay on one
// node: which node each group goes to, and each node's part of a layer as a small layer of its
// own. Internal to the planner and its tests.
//
// A node holds the same number of groups and of slots as every other, so the layer's busiest
// shard is at least the heaviest node's load over its shards: groups are balanced over nodes by
// load first, then each node is planned like a layer (replicas, packing, swaps).
#pragma once

#include <cstdint>
#include <vector>

#include "eplb/expert_groups.hpp"

namespace brigade::eplb {

/// Each group's load: the sum of its experts' loads.
std::vector<double> group_loads(const double* load, const group_dims& dims);

/// Each node's load under a group-to-node map.
std::vector<double> node_loads(const std::vector<int>& node_of_group,
                               const std::vector<double>& group_load, const group_dims& dims);

/// Groups onto nodes, the same number on each, balanced by load: heaviest first onto the least
/// loaded node with room, then swaps while they lower the heaviest node. Returns node_of_group.
std::vector<int> pack_groups(const std::vector<double>& group_load, const group_dims& dims);

/// The node each group lives on in a phy2log row: the one holding most of its slots, the same
/// number of groups on each node (a row made without groups may spread them).
std::vector<int> groups_in_row(const int32_t* row, const group_dims& dims);

/// Slots of `row` each group holds on each node, [group * nodes + node]: moving group g from node
/// a to node b copies held[g][a] - held[g][b] more slots than leaving it on a.
std::vector<int> group_slots_by_node(const int32_t* row, const group_dims& dims);

/// Swaps groups between nodes while the heaviest node is above `target` and a swap lowers it.
/// With `held` (see group_slots_by_node; empty: swaps are free) a swap costs the slots it copies
/// beyond the map it started from, and the swaps spend at most `max_moves` in all; swaps that
/// reach the target are preferred cheapest first. Returns the slots spent.
int swap_groups(std::vector<int>& node_of_group, const std::vector<double>& group_load,
                const group_dims& dims, double target, const std::vector<int>& held, int max_moves);

/// The experts of the groups on `node`, ascending: local expert i of the node is members[i].
std::vector<int32_t> node_members(const std::vector<int>& node_of_group, int node,
                                  const group_dims& dims);

/// The loads of `members`.
std::vector<double> member_loads(const double* load, const std::vector<int32_t>& members);

/// The slots of `node` in `row`, in local expert ids, made legal for the node's new members:
/// slots of experts that left are given first to members without a slot there (heaviest first,
/// onto the least loaded shards), then to the members with the highest load per replica; when
/// too few slots left, members with spare replicas give some up first.
std::vector<int32_t> seeded_node_row(const int32_t* row, int node,
                                     const std::vector<int32_t>& members,
                                     const std::vector<double>& local_load, const group_dims& dims);

}  // namespace brigade::eplb
