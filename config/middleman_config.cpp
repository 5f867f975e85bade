#include "config/middleman_config.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

namespace brigade::config {

void configure_middleman(caf::actor_system_config& cfg, int heartbeat_ms, int dead_after_ms) {
  cfg.load<caf::io::middleman>();
  cfg.set("middleman.heartbeat-interval", caf::timespan{std::chrono::milliseconds(heartbeat_ms)});
  cfg.set("middleman.connection-timeout", caf::timespan{std::chrono::milliseconds(dead_after_ms)});
}

}  // namespace brigade::config
