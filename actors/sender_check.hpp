// Who sent the message being handled. Messages from other nodes arrive through CAF's middleman,
// where any peer may address any actor it learned of; handlers that change what a role serves
// check that the message came from the actor entitled to send it.
#pragma once

#include <caf/actor_control_block.hpp>
#include <caf/node_id.hpp>

namespace brigade::actors {

/// Whether `sender` is `expected` (the same actor id on the same node). A null expected handle
/// matches nobody.
template <class Handle>
bool sent_by(const caf::strong_actor_ptr& sender, const Handle& expected) {
  if (!sender || !expected) return false;
  return sender->id() == expected->id() && sender->node() == expected->node();
}

/// Whether `sender` runs in this process: fault injection and other local-only requests.
inline bool sent_locally(const caf::strong_actor_ptr& sender, const caf::node_id& self_node) {
  return sender && sender->node() == self_node;
}

}  // namespace brigade::actors
