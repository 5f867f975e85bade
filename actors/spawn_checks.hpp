// What a node checks in a role's spawn request before it builds the role: the configuration comes
// from the coordinator over the network, and a count of zero (a division), a size past any model
// (an allocation) or a layout of another model must be refused with its name, not crash the node.
#pragma once

#include "actors/decode_worker.hpp"
#include "actors/expert_shard.hpp"
#include "actors/prefill_worker.hpp"
#include "actors/shard_set.hpp"
#include "common/result.hpp"
#include "model/config.hpp"

namespace brigade::actors {

status check_spawn(const model::model_config& model, const expert_shard_config& config);
status check_spawn(const model::model_config& model, const decode_worker_config& config,
                   const shard_set& shards);
status check_spawn(const model::model_config& model, const prefill_worker_config& config,
                   const shard_set& shards);

}  // namespace brigade::actors
