// Whether a manifest's `eplb.group_placement: node` can hold the model it serves: the model's
// expert groups (n_group) spread evenly over the nodes hosting expert shards.
#pragma once

#include "common/result.hpp"

namespace brigade::config {
struct manifest;
}
namespace brigade::model {
struct model_config;
}
namespace brigade::eplb {
class layout;
}

namespace brigade::deploy {

/// The nodes that host expert shards, in manifest order (the planner's nodes); 1 without nodes.
int expert_shard_nodes(const config::manifest& m);

/// ok when the manifest places experts freely, or when group placement fits `model` on
/// `layout`'s shards; otherwise an error naming eplb.group_placement and what does not divide.
status check_group_placement(const config::manifest& m, const model::model_config& model,
                             const eplb::layout& layout);

}  // namespace brigade::deploy
