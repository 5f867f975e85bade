#include "deploy/group_placement_check.hpp"

#include <string>

#include "config/manifest.hpp"
#include "eplb/expert_groups.hpp"
#include "eplb/layout.hpp"
#include "model/config.hpp"

namespace brigade::deploy {

int expert_shard_nodes(const config::manifest& m) {
  int nodes = 0;
  for (const auto& n : m.nodes)
    nodes += n.expert_shards > 0 ? 1 : 0;
  return nodes > 0 ? nodes : 1;
}

status check_group_placement(const config::manifest& m, const model::model_config& model,
                             const eplb::layout& layout) {
  if (m.eplb.placement != config::group_placement::node) return ok_status();
  status s =
      eplb::validate_expert_groups(model.num_experts, layout.shards(), layout.slots_per_shard(),
                                   expert_shard_nodes(m), model.expert_groups, true);
  if (s) return s;
  return error(errc::invalid_argument,
               "eplb.group_placement: node cannot hold " + m.model + " (" +
                   std::to_string(model.num_experts) + " experts in n_group " +
                   std::to_string(model.expert_groups) + " groups): " + s.err().message +
                   "; use group_placement: free or change the nodes hosting expert shards");
}

}  // namespace brigade::deploy
