// CAF middleman settings shared by coordinators and nodes: heartbeats on, so that a hung node is
// noticed (CAF's default never notices one), and the middleman module loaded.
#pragma once

#include <caf/fwd.hpp>

namespace brigade::deploy {

/// Loads the middleman with a 200 ms heartbeat and a 1 s connection timeout: a killed node is
/// noticed when its connection resets, a stopped one within about 1.2 s.
void configure_middleman(caf::actor_system_config& cfg);

}  // namespace brigade::deploy
