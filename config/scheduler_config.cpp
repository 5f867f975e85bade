#include "config/scheduler_config.hpp"

#include <caf/actor_system_config.hpp>

#include <cstddef>

namespace brigade::config {

void configure_scheduler(caf::actor_system_config& cfg) {
  cfg.set("scheduler.max-threads", size_t{2});
  // A few aggressive polls stay (CAF's default 100, a few microseconds); the moderate phase goes,
  // so an idle worker waits on its condition variable, which a new job notifies.
  cfg.set("work-stealing.moderate-poll-attempts", size_t{0});
}

}  // namespace brigade::config
