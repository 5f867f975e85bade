#include "eplb/planner.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "eplb/expert_groups.hpp"
#include "eplb/grouped_plans.hpp"
#include "eplb/layer_plans.hpp"
#include "eplb/shard_renumbering.hpp"

namespace brigade::eplb {

status validate_plan_input(const load_matrix& load, const planner_options& options,
                           const layout* current) {
  if (status s = validate_load_matrix(load); !s) return s;
  const layout_shape shape{static_cast<int>(load.size()), static_cast<int>(load.front().size()),
                           options.shards, options.slots_per_shard};
  if (status s = validate_layout_shape(shape); !s) return s;
  if (options.nodes <= 0 || options.shards % options.nodes != 0) {
    return error(errc::invalid_argument,
                 std::to_string(options.nodes) + " nodes do not divide " +
                     std::to_string(options.shards) +
                     " shards: every node must hold the same number of shards");
  }
  if (status s =
          validate_expert_groups(shape.experts, options.shards, options.slots_per_shard,
                                 options.nodes, options.expert_groups, options.groups_per_node);
      !s) {
    return s;
  }
  if (!(options.keep_slack >= 0)) {
    return error(errc::invalid_argument, "keep_slack must be a non-negative fraction");
  }
  if (!(options.max_moved_fraction > 0 && options.max_moved_fraction <= 1)) {
    return error(errc::invalid_argument, "max_moved_fraction must be in (0, 1]");
  }
  if (current && current->shape() != shape) {
    return error(errc::invalid_argument,
                 "current layout has " + std::to_string(current->layers()) + " layers, " +
                     std::to_string(current->experts()) + " experts, " +
                     std::to_string(current->shards()) + " shards of " +
                     std::to_string(current->slots_per_shard()) + " slots; the load and options " +
                     "need " + std::to_string(shape.layers) + ", " + std::to_string(shape.experts) +
                     ", " + std::to_string(shape.shards) + ", " +
                     std::to_string(shape.slots_per_shard));
  }
  return ok_status();
}

result<layout> plan_layout(const load_matrix& load, const planner_options& options,
                           const layout* current) {
  if (status s = validate_plan_input(load, options, current); !s) return s.err();
  const layer_dims dims{static_cast<int>(load.front().size()), options.shards,
                        options.slots_per_shard, options.nodes};
  const group_dims groups{dims.experts, options.expert_groups, options.nodes, options.shards,
                          options.slots_per_shard};
  const near_terms terms{options.keep_slack, options.max_moved_fraction};
  std::vector<std::vector<int32_t>> phy2log(load.size());
  std::vector<double> summed_load(options.shards, 0.0);
  for (size_t layer = 0; layer < load.size(); ++layer) {
    const double* layer_load = load[layer].data();
    const int32_t* current_row =
        current ? current->phy2log(static_cast<int>(layer)).data() : nullptr;
    if (options.groups_per_node) {
      phy2log[layer] = current_row ? plan_grouped_near(layer_load, groups, current_row, terms)
                                   : plan_grouped_fresh(layer_load, groups, summed_load);
    } else if (current_row) {
      phy2log[layer] = plan_layer_near(layer_load, dims, current_row, terms);
    } else {
      std::vector<int32_t> counts;
      const shard_assignment fresh = plan_layer_fresh(layer_load, dims, counts);
      phy2log[layer] = align_to_summed_load(fresh, summed_load);
    }
  }
  const layout_shape shape{static_cast<int>(load.size()), dims.experts, options.shards,
                           options.slots_per_shard};
  return layout::from_phy2log(shape, std::move(phy2log), current ? current->epoch() + 1 : 0);
}

}  // namespace brigade::eplb
