// CAF middleman settings shared by coordinators and nodes: heartbeats on, so that a hung peer is
// noticed (CAF's default never notices one), and the middleman module loaded.
#pragma once

#include <caf/fwd.hpp>

namespace brigade::config {

/// Loads the middleman with heartbeats every `heartbeat_ms` and a connection closed after
/// `dead_after_ms` of silence: a killed peer is noticed when its connection resets, a stopped
/// or cut-off one after dead_after_ms (the manifest's liveness section; nodes take it on their
/// command line).
void configure_middleman(caf::actor_system_config& cfg, int heartbeat_ms = 200,
                         int dead_after_ms = 3000);

}  // namespace brigade::config
