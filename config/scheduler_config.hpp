// CAF scheduler settings shared by coordinators and nodes.
#pragma once

#include <caf/fwd.hpp>

namespace brigade::config {

/// Two scheduler threads (compute actors run detached; the scheduler carries the router,
/// registry, supervisor and the data plane's proxies) that go to sleep when their queue runs dry
/// instead of polling it every 50 us for 25 ms after each job, CAF's default: on cores the
/// compute threads need, that polling took 15-25% off decode steps whose expert calls cross
/// nodes (bench balance --migration-nodes: median step 25-29 ms polling, 20-22 ms without).
///
/// The threads the actor system starts (its scheduler's, its clock's and the detached roles'
/// own: the workers and shards) run under SCHED_BATCH, unless BRIGADE_SCHED_BATCH=0. Every
/// decode step ends with a send to the router, whose scheduler thread was asleep, and under the
/// default policy the woken thread preempted the decode worker on its core: the send cost 43 us
/// of a 0.18 ms step at batch 1, and one user's tokens came 1.45x slower through the topology
/// than from the engine. A SCHED_BATCH thread woken does not preempt: it runs when a core yields
/// (the compute pool's idle workers yield within microseconds), and the send costs 4 us. Threads
/// brigade starts itself (the HTTP server's, the compute pool's) keep the default policy, so a
/// request arriving still preempts.
void configure_scheduler(caf::actor_system_config& cfg);

}  // namespace brigade::config
