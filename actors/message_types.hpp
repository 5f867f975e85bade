// Registers the message types and actor handles of every role with an actor system's config.
// Each role registers its own types next to their definitions (its protocol header declares
// register_<role>_types); this only calls them all. Processes that host roles or talk to them
// call it (deploy::register_message_types adds the node agents' and the supervisor's): CAF 0.17
// silently drops messages of types one side did not register.
#pragma once

#include <caf/fwd.hpp>

namespace brigade::actors {

void register_role_types(caf::actor_system_config& cfg);

}  // namespace brigade::actors
