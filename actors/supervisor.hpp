// Supervisor: spawns the role actors of a topology, monitors every one of them and restarts a
// failed one by the manifest's policy (restart intensity and exponential backoff), telling the
// router and the workers about the replacement. It also injects faults on request.
//
// A supervised actor's life:
//
//   spawned --(dies)--> dead --(restarts within intensity: after backoff)--> spawned (gen + 1)
//      |                   \--(intensity exceeded)--> given up (registry: final)
//      |
//      +--(its node unreachable)--> awaiting its node --(node answers within rejoin_window)-->
//              adopted back (same generation; fresh handles to router and supervisor)
//                 \--(window over, or the node lost it)--> spawned elsewhere (gen + 1)
//
// A node's roles are not restarted the moment its connection closes: a node that answers a
// re-dial within the manifest's liveness.rejoin_window keeps them (a paused coordinator, a
// network blip). Roles moved off a node go back to it (home) once it is in contact again.
#pragma once

#include <caf/actor.hpp>
#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "actors/atoms.hpp"
#include "actors/cache_options.hpp"
#include "actors/expert_layout.hpp"
#include "actors/expert_shard.hpp"
#include "actors/model_context.hpp"
#include "actors/node_agent.hpp"
#include "actors/payloads.hpp"
#include "actors/registry.hpp"
#include "actors/router.hpp"
#include "deploy/manifest.hpp"
#include "deploy/placement.hpp"

namespace brigade::actors {

/// What a re-plan request did (the reply to replan_atom).
enum class replan_outcome : int32_t {
  started,        ///< The migration runs; the actor named, if any, was killed as it started.
  busy,           ///< A migration is already running, or the topology is stopping.
  no_such_actor,  ///< The actor to kill is not alive; no migration was started.
};

using supervisor_actor = caf::typed_actor<
    /// Fault injection: kills the named role actor.
    caf::replies_to<kill_atom, std::string>::with<bool>, caf::reacts_to<restart_atom, std::string>,
    /// A shard's token counts for one sample window.
    caf::reacts_to<load_sample>,
    /// A worker now routes with the layout of this epoch.
    caf::reacts_to<switched_atom, std::string, uint64_t>,
    /// Tests and fault injection: migrates to a random valid layout built from the seed, moving
    /// about `move_fraction` of the slots. A non-empty name is killed as the migration starts,
    /// in the same turn, its exit sent before the prepares: a shard so killed dies
    /// mid-migration every time, and the migration rolls back. Replies a replan_outcome.
    caf::replies_to<replan_atom, uint64_t, double, std::string>::with<int32_t>,
    /// GET /v1/experts: layout, per-shard load per window, balancedness history, migration.
    caf::replies_to<experts_atom>::with<std::string>,
    /// GET /v1/events: the events after sequence number `since`, as a JSON array.
    caf::replies_to<events_atom, uint64_t>::with<std::string>,
    caf::replies_to<status_atom>::with<role_status>,
    caf::replies_to<status_atom, bool>::with<std::vector<role_status>>,
    /// From the coordinator's membership (this process only): a node's connection closed; with
    /// `gone` its address refuses connections too (the process is not there: no point waiting).
    caf::reacts_to<node_lost_atom, std::string, std::string, bool>,
    /// A lost node answers again: its new agent handle, and the roles it still holds for us.
    caf::reacts_to<node_back_atom, std::string, node_agent_actor, std::vector<held_role>>,
    /// A node's heartbeats are late (true), or on time again (false).
    caf::reacts_to<suspect_atom, std::string, bool>,
    /// From a node's agent: the node is stopping (SIGTERM). Its roles stop next; they are
    /// spawned elsewhere at once and no new role goes there.
    caf::reacts_to<leave_atom, std::string>,
    /// Internal: the rejoin window of a lost node ended (the number names which loss).
    caf::reacts_to<rejoin_atom, std::string, uint64_t>>;

struct supervisor_config {
  deploy::manifest manifest;
  expert_layout layout;
  /// Where each role instance runs ("local": in this process).
  std::vector<deploy::placed_role> placement;
  /// The agents of the manifest's nodes, by node name (replaced when a node rejoins).
  std::map<std::string, node_agent_actor> agents;
  cache_options cache;
};

/// Spawns the supervisor, which spawns the shards and workers at once and announces the workers
/// to `router`.
supervisor_actor spawn_supervisor(caf::actor_system& sys, std::shared_ptr<const model_context> ctx,
                                  supervisor_config config, registry_actor registry,
                                  router_actor router);

}  // namespace brigade::actors
