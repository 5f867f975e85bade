// Registers every message type and actor handle that crosses a node boundary. Coordinator and
// nodes must call it on their configs alike: CAF 0.17 silently drops messages of types one side
// did not register.
#pragma once

#include <caf/fwd.hpp>

namespace brigade::actors {

void register_message_types(caf::actor_system_config& cfg);

}  // namespace brigade::actors
