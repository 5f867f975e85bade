// A worker's calls to the expert shards of its own process: their rows computed by the worker
// itself, from the weights and with the accounting of each shard's core (actors/shard_core.hpp).
// Shards on the worker's own device compute in place, from the layer's inputs to its outputs
// (step_driver::run_experts, as the engine's experts do); those on another device of the
// process through host rows, each device's in one grouped hand-off.
// Used by dispatch_layer (actors/expert_dispatch.hpp) for the shards whose cores it finds.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/expert_shard.hpp"
#include "actors/shard_core.hpp"
#include "model/step_driver.hpp"

namespace brigade::actors {

/// One shard's part of a layer, for a shard of this process.
struct local_call {
  size_t shard = 0;  ///< Its index in the worker's shard set.
  expert_shard_actor handle;
  std::shared_ptr<shard_core> core;
  std::vector<int32_t> step_slots;  ///< The driver's slots of its rows.
  std::vector<int32_t> physical;    ///< The physical slot of each row.
};

/// What a worker computes local shards' rows in, kept between layers.
struct local_scratch {
  struct on_device {
    std::shared_ptr<const model_context> ctx;  ///< Keeps the device alive beside the buffers.
    ffn_scratch ffn;
  };
  std::map<const model_context*, on_device> devices;
  std::vector<float> input, output;
};

/// A local call that failed: which shard, and why.
struct local_failure {
  size_t shard = 0;
  std::string why;
};

/// Takes each call's rows from its shard's core (step, caller and epoch as a message would name
/// them, `sender` the worker), computes them and delivers them to `driver`. Load samples the
/// calls complete go to the supervisor under the shard's name. On a failure nothing is
/// delivered and the first failing call is returned.
std::optional<local_failure> run_local_calls(const std::vector<local_call>& calls, uint64_t step,
                                             uint64_t caller, uint64_t epoch,
                                             model::step_driver& driver,
                                             const caf::strong_actor_ptr& sender,
                                             local_scratch& scratch);

}  // namespace brigade::actors
