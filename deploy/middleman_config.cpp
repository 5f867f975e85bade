#include "deploy/middleman_config.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <chrono>

namespace brigade::deploy {

void configure_middleman(caf::actor_system_config& cfg) {
  cfg.load<caf::io::middleman>();
  cfg.set("middleman.heartbeat-interval", caf::timespan{std::chrono::milliseconds(200)});
  cfg.set("middleman.connection-timeout", caf::timespan{std::chrono::seconds(1)});
}

}  // namespace brigade::deploy
