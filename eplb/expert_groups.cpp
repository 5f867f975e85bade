#include "eplb/expert_groups.hpp"

#include <string>

namespace brigade::eplb {

status validate_expert_groups(int experts, int shards, int slots_per_shard, int nodes,
                              int expert_groups, bool per_node) {
  const std::string g = std::to_string(expert_groups);
  if (expert_groups < 1 || experts % expert_groups != 0) {
    return error(errc::invalid_argument,
                 "expert_groups (" + g + ") must divide the " + std::to_string(experts) +
                     " experts: group g holds the experts [g * E / G, (g + 1) * E / G)");
  }
  if (!per_node) return ok_status();
  if (nodes < 2) {
    return error(errc::invalid_argument, "groups_per_node needs more than one node (nodes is " +
                                             std::to_string(nodes) +
                                             "): on one node every group is on that node already");
  }
  if (expert_groups % nodes != 0) {
    return error(errc::invalid_argument, "groups_per_node needs expert_groups (" + g +
                                             ") divisible by nodes (" + std::to_string(nodes) +
                                             "): every node holds the same number of groups");
  }
  const int node_experts = experts / nodes;
  if (slots_per_shard > node_experts) {
    return error(errc::invalid_argument,
                 "groups_per_node puts " + std::to_string(node_experts) + " experts on each of " +
                     std::to_string(nodes) + " nodes, fewer than the " +
                     std::to_string(slots_per_shard) + " slots of a shard (of " +
                     std::to_string(shards) + "), and a shard holds an expert only once");
  }
  return ok_status();
}

std::vector<int> group_nodes_of(const layout& l, int layer, int nodes, int expert_groups) {
  const int shards_per_node = l.shards() / nodes;
  const int per_group = l.experts() / expert_groups;
  std::vector<int> node(static_cast<size_t>(expert_groups), -2);  // -2: not seen yet
  for (int slot = 0; slot < l.slots(); ++slot) {
    const int n = l.shard_of(slot) / shards_per_node;
    int& of_group = node[static_cast<size_t>(l.logical(layer, slot) / per_group)];
    if (of_group == -2) {
      of_group = n;
    } else if (of_group != n) {
      of_group = -1;
    }
  }
  return node;
}

bool groups_stay_on_nodes(const layout& l, int nodes, int expert_groups) {
  for (int layer = 0; layer < l.layers(); ++layer) {
    for (int n : group_nodes_of(l, layer, nodes, expert_groups)) {
      if (n < 0) return false;
    }
  }
  return true;
}

}  // namespace brigade::eplb
