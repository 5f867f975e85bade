#include "eplb/grouped_plans.hpp"

#include <algorithm>
#include <numeric>

#include "eplb/group_packing.hpp"
#include "eplb/shard_assignment.hpp"
#include "eplb/shard_renumbering.hpp"

namespace brigade::eplb {

namespace {

layer_dims layer_dims_of(const group_dims& g) {
  return {g.experts, g.shards, g.slots_per_shard, g.nodes};
}

/// One node's part of a layer: its members and its shards, without node caps.
layer_dims node_dims_of(const group_dims& g) {
  return {g.experts / g.nodes, g.shards_per_node(), g.slots_per_shard, 1};
}

/// Writes a node's plan, in its local expert ids, into the node's slots of a layer row.
void write_node(const std::vector<int32_t>& local_row, const std::vector<int32_t>& members,
                int node, std::vector<int32_t>& row) {
  const size_t first = static_cast<size_t>(node) * local_row.size();
  for (size_t i = 0; i < local_row.size(); ++i)
    row[first + i] = members[local_row[i]];
}

shard_assignment assignment_of(const double* load, const std::vector<int32_t>& row,
                               const group_dims& g) {
  const std::vector<int32_t> counts = replica_counts_of(row.data(), layer_dims_of(g));
  shard_assignment a(g.experts, g.shards, g.slots_per_shard, g.nodes);
  a.set_replicas(load, counts.data());
  a.assign_from(row.data());
  return a;
}

double busiest_of(const shard_assignment& a) {
  return a.load(a.busiest_shard());
}

/// Groups packed onto nodes afresh, each node planned fresh.
shard_assignment fresh_grouped(const double* load, const group_dims& g) {
  const std::vector<int> node_of_group = pack_groups(group_loads(load, g), g);
  std::vector<int32_t> row(static_cast<size_t>(g.shards) * g.slots_per_shard);
  for (int n = 0; n < g.nodes; ++n) {
    const std::vector<int32_t> members = node_members(node_of_group, n, g);
    const std::vector<double> local = member_loads(load, members);
    std::vector<int32_t> counts;
    write_node(plan_layer_fresh(local.data(), node_dims_of(g), counts).phy2log(), members, n, row);
  }
  return assignment_of(load, row, g);
}

/// Slots of the current row whose group it has on another node: moves grouping needs.
int off_node_slots(const std::vector<int>& held, const std::vector<int>& node_of_group,
                   const group_dims& g) {
  int home = 0;
  for (int group = 0; group < g.groups; ++group)
    home += held[static_cast<size_t>(group) * g.nodes + node_of_group[group]];
  return g.shards * g.slots_per_shard - home;
}

/// The current row repaired: groups swapped between nodes only while the heaviest node is beyond
/// the slack above `best_node_load`, then each node re-planned near its part of the row.
std::vector<int32_t> repair_grouped(const double* load, const std::vector<double>& group_load,
                                    const group_dims& g, const int32_t* current_row,
                                    const near_terms& terms, double best_node_load) {
  std::vector<int> node_of_group = groups_in_row(current_row, g);
  const double total = std::accumulate(group_load.begin(), group_load.end(), 0.0);
  const double slack = terms.keep_slack * total / g.nodes;
  const std::vector<double> now = node_loads(node_of_group, group_load, g);
  const int slots = g.shards * g.slots_per_shard;
  const int budget = static_cast<int>(terms.max_moved_fraction * slots);
  int spent = 0;
  if (*std::max_element(now.begin(), now.end()) > best_node_load + slack) {
    // Repaired down to the middle of the slack, so that drift does not push it straight back.
    spent = swap_groups(node_of_group, group_load, g, best_node_load + slack / 2,
                        group_slots_by_node(current_row, g), budget);
  }
  near_terms node_terms = terms;
  node_terms.max_moved_fraction = std::max(0, budget - spent) / static_cast<double>(slots);
  std::vector<int32_t> row(static_cast<size_t>(slots));
  for (int n = 0; n < g.nodes; ++n) {
    const std::vector<int32_t> members = node_members(node_of_group, n, g);
    const std::vector<double> local = member_loads(load, members);
    const std::vector<int32_t> seeded = seeded_node_row(current_row, n, members, local, g);
    write_node(plan_layer_near(local.data(), node_dims_of(g), seeded.data(), node_terms), members,
               n, row);
  }
  return row;
}

}  // namespace

std::vector<int32_t> plan_grouped_fresh(const double* load, const group_dims& dims,
                                        std::vector<double>& summed_load) {
  return align_to_summed_load(fresh_grouped(load, dims), summed_load);
}

std::vector<int32_t> plan_grouped_near(const double* load, const group_dims& dims,
                                       const int32_t* current_row, const near_terms& terms) {
  const std::vector<double> group_load = group_loads(load, dims);
  const std::vector<double> packed = node_loads(pack_groups(group_load, dims), group_load, dims);
  const double best_node_load = *std::max_element(packed.begin(), packed.end());
  std::vector<int32_t> repaired =
      repair_grouped(load, group_load, dims, current_row, terms, best_node_load);
  const double reached = busiest_of(assignment_of(load, repaired, dims));
  const double mean = std::accumulate(group_load.begin(), group_load.end(), 0.0) / dims.shards;
  // A fresh plan's busiest shard carries at least its heaviest node's mean shard load, so a repair
  // within the slack of that needs no fresh plan to be judged against.
  auto within_slack_of = [&](double busiest) {
    return reached <= (busiest + terms.keep_slack * mean) * (1 + 1e-9);
  };
  if (within_slack_of(best_node_load / dims.shards_per_node())) return repaired;
  const shard_assignment fresh = fresh_grouped(load, dims);
  if (within_slack_of(busiest_of(fresh))) return repaired;
  std::vector<int32_t> aligned = align_to_current(fresh, current_row);
  const int moved =
      moved_in_layer(current_row, aligned.data(), dims.experts, dims.shards, dims.slots_per_shard);
  const int needed = off_node_slots(group_slots_by_node(current_row, dims),
                                    groups_in_row(current_row, dims), dims);
  const int budget =
      static_cast<int>(terms.max_moved_fraction * dims.shards * dims.slots_per_shard);
  if (moved <= needed + budget && busiest_of(fresh) < reached) return aligned;
  return repaired;
}

}  // namespace brigade::eplb
