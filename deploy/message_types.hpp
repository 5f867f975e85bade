// Registers every message type a coordinator or a node exchanges: the roles' (each registered
// next to its protocol), the node agents' and the supervisor's. Coordinator and nodes must call
// it on their configs alike: CAF 0.17 silently drops messages of types one side did not register.
#pragma once

#include <caf/fwd.hpp>

namespace brigade::deploy {

void register_message_types(caf::actor_system_config& cfg);

}  // namespace brigade::deploy
