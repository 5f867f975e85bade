// The expert shards a worker sends activations to, with the layout that maps experts to them.
#pragma once

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/typed_actor.hpp>

#include <memory>
#include <string>
#include <vector>

#include "actors/atoms.hpp"
#include "actors/expert_layout.hpp"
#include "actors/expert_shard.hpp"

namespace brigade::actors {

/// Where workers report the layout epoch they route with (the supervisor).
using layout_ack_actor = caf::typed_actor<caf::reacts_to<switched_atom, std::string, uint64_t>>;

struct shard_set {
  std::vector<expert_shard_actor> shards;  ///< Indexed like the layout's shards.
  std::shared_ptr<const expert_layout> layout;
};

}  // namespace brigade::actors

// Shard sets travel between actors of one process only; issue 4's nodes send layouts by value.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(brigade::actors::shard_set)
