// Expert shard: holds the weights of some physical expert slots and computes expert FFNs on the
// rows routed to them. It counts tokens per logical expert for load balancing.
#pragma once

#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "actors/atoms.hpp"
#include "actors/model_context.hpp"
#include "actors/payloads.hpp"

namespace brigade::actors {

/// Rows of one MoE layer for this shard: each row goes through the expert in its slot.
struct expert_request {
  uint64_t step = 0;           ///< The sender's step number, for tracing.
  int32_t layer = 0;
  std::vector<int32_t> slots;  ///< Physical slot of each input row.
  tensor_rows input;           ///< [rows, hidden]
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, expert_request& x) {
  return f(caf::meta::type_name("expert_request"), x.step, x.layer, x.slots, x.input);
}

/// The FFN output of every input row, in the same order.
struct expert_reply {
  uint64_t step = 0;
  int32_t layer = 0;
  tensor_rows output;  ///< [rows, hidden]
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, expert_reply& x) {
  return f(caf::meta::type_name("expert_reply"), x.step, x.layer, x.output);
}

/// A slot this shard holds: the expert in (layer, slot).
struct slot_assignment {
  int32_t layer = 0;
  int32_t slot = 0;
  int32_t expert = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, slot_assignment& x) {
  return f(caf::meta::type_name("slot_assignment"), x.layer, x.slot, x.expert);
}

using expert_shard_actor =
    caf::typed_actor<caf::replies_to<expert_request>::with<expert_reply>,
                     caf::replies_to<status_atom>::with<role_status>>;

struct expert_shard_config {
  std::string name;  ///< "expert_shard-2"
  std::vector<slot_assignment> slots;
};

/// Spawns a shard that loads its slots' weights from the context's checkpoint.
expert_shard_actor spawn_expert_shard(caf::actor_system& sys,
                                      std::shared_ptr<const model_context> ctx,
                                      expert_shard_config config);

}  // namespace brigade::actors
