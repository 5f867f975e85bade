// CAF scheduler settings shared by coordinators and nodes.
#pragma once

#include <caf/fwd.hpp>

namespace brigade::config {

/// Two scheduler threads (compute actors run detached; the scheduler carries the router,
/// registry, supervisor and the data plane's proxies) that go to sleep when their queue runs dry
/// instead of polling it every 50 us for 25 ms after each job, CAF's default: on cores the
/// compute threads need, that polling took 15-25% off decode steps whose expert calls cross
/// nodes (bench balance --migration-nodes: median step 25-29 ms polling, 20-22 ms without).
void configure_scheduler(caf::actor_system_config& cfg);

}  // namespace brigade::config
