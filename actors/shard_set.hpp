// The expert shards a worker sends activations to, with the layout that maps experts to them.
#pragma once

#include <caf/allowed_unsafe_message_type.hpp>

#include <memory>
#include <vector>

#include "actors/expert_layout.hpp"
#include "actors/expert_shard.hpp"

namespace brigade::actors {

struct shard_set {
  std::vector<expert_shard_actor> shards;  ///< Indexed like the layout's shards.
  std::shared_ptr<const expert_layout> layout;
};

}  // namespace brigade::actors

// Shard sets travel between actors of one process only; issue 4's nodes send layouts by value.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(brigade::actors::shard_set)
