// Layer plans that keep every replica of an expert group on one node (planner_options::
// groups_per_node): groups packed onto nodes by load, then each node's part of the layer planned
// as a layer of its own. Internal to the planner and its tests.
#pragma once

#include <cstdint>
#include <vector>

#include "eplb/expert_groups.hpp"
#include "eplb/layer_plans.hpp"

namespace brigade::eplb {

/// A fresh plan of one layer, its shards numbered (whole nodes, then shards within a node, which
/// keeps every group on one node) so that `summed_load`, the load of earlier layers, stays even;
/// adds this layer's load to it.
std::vector<int32_t> plan_grouped_fresh(const double* load, const group_dims& dims,
                                        std::vector<double>& summed_load);

/// A re-plan of one layer near `current_row`. Groups stay on the nodes the current row has them
/// on while the heaviest node is within the slack of a fresh packing's; otherwise whole groups
/// swap nodes, the slots they copy counting in the move budget, and each node is re-planned near
/// its part of the row with what the budget has left. When that falls short of the fresh plan
/// and the fresh plan, renumbered onto the current row, fits the budget, the fresh plan wins.
/// Slots of groups that the current row has off their node move whatever the budget.
std::vector<int32_t> plan_grouped_near(const double* load, const group_dims& dims,
                                       const int32_t* current_row, const near_terms& terms);

}  // namespace brigade::eplb
