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
#include "actors/decode_worker.hpp"
#include "actors/expert_shard.hpp"
#include "actors/kv_store.hpp"
#include "actors/model_context.hpp"
#include "actors/payloads.hpp"
#include "actors/prefill_worker.hpp"
#include "actors/registry.hpp"
#include "actors/router.hpp"
#include "cluster/node_agent_protocol.hpp"
#include "config/manifest.hpp"
#include "config/role_placement.hpp"
#include "eplb/layout.hpp"
#include "kvcache/clock.hpp"

namespace brigade::deploy {

// The composition layer speaks the roles' vocabulary (and the node agents').
using namespace brigade::actors;
using namespace brigade::cluster;

/// What a re-plan request did (the reply to replan_atom).
enum class replan_outcome : int32_t {
  started,        ///< The migration runs; the actor named, if any, was killed as it started.
  busy,           ///< A migration is already running, or the topology is stopping.
  no_such_actor,  ///< The actor to kill is not alive; no migration was started.
};

/// The supervisor's own figures: restarts, and the expert balance it keeps.
struct supervisor_status {
  role_status load;  ///< in_flight: 1 while experts migrate; steps: restarts
  int64_t children = 0;
  int64_t restarts = 0;
  double balancedness = 1.0;  ///< Mean over max per-shard load in the last sample window.
  int64_t rebalances_adopted = 0;
  int64_t rebalances_rolled_back = 0;
  int64_t rebalances_rejected = 0;
  std::vector<double> migration_durations_s;
  uint64_t layout_epoch = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, supervisor_status& x) {
  return f(caf::meta::type_name("supervisor_status"), x.load, x.children, x.restarts,
           x.balancedness, x.rebalances_adopted, x.rebalances_rolled_back, x.rebalances_rejected,
           x.migration_durations_s, x.layout_epoch);
}

/// Every live child's status, by kind.
struct role_statuses {
  std::vector<expert_shard_status> expert_shards;
  std::vector<kv_store_status> kv_stores;
  std::vector<prefill_status> prefill;
  std::vector<decode_status> decode;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, role_statuses& x) {
  return f(caf::meta::type_name("role_statuses"), x.expert_shards, x.kv_stores, x.prefill,
           x.decode);
}

/// What the supervisor accepts. It spawns and restarts the roles (actors/role_spawner.hpp, or
/// a node agent's spawn), sends workers their shard sets and the router its workers.
using supervisor_actor = caf::typed_actor<
    /// Fault injection (this process only): kills the named role actor.
    caf::replies_to<kill_atom, std::string>::with<bool>,
    /// From the shards: their token counts for one sample window (load_sink_actor).
    caf::reacts_to<load_sample>,
    /// From the workers: they route with the layout of this epoch now (layout_ack_actor).
    caf::reacts_to<switched_atom, std::string, uint64_t>,
    /// Tests and fault injection (this process only): migrates to a random valid layout built
    /// from the seed, moving about `move_fraction` of the slots. A non-empty name is killed as
    /// the migration starts, in the same turn, its exit sent before the prepares: a shard so
    /// killed dies mid-migration every time, and the migration rolls back. Replies a
    /// replan_outcome.
    caf::replies_to<replan_atom, uint64_t, double, std::string>::with<int32_t>,
    /// GET /v1/experts: layout, per-shard load per window, balancedness history, migration.
    caf::replies_to<experts_atom>::with<std::string>,
    /// GET /v1/events: the events after sequence number `since`, as a JSON array.
    caf::replies_to<events_atom, uint64_t>::with<std::string>,
    caf::replies_to<status_atom>::with<supervisor_status>,
    /// Every live child's status.
    caf::replies_to<status_atom, bool>::with<role_statuses>,
    /// From the coordinator's membership (this process only): a node's connection closed; with
    /// `gone` its address refuses connections too (the process is not there: no point waiting).
    caf::reacts_to<node_lost_atom, std::string, std::string, bool>,
    /// A lost node answers again: its new agent handle, and the roles it still holds for us.
    caf::reacts_to<node_back_atom, std::string, node_agent_actor, std::vector<held_role>>,
    /// A node's heartbeats are late (true), or on time again (false).
    caf::reacts_to<suspect_atom, std::string, bool>,
    /// From a node's agent (node_owner_actor): the node is stopping (SIGTERM). Its roles stop
    /// next; they are spawned elsewhere at once and no new role goes there.
    caf::reacts_to<leave_atom, std::string>>;

struct supervisor_config {
  config::manifest manifest;
  eplb::layout layout;
  /// Where each role instance runs ("local": in this process).
  std::vector<config::placed_role> placement;
  /// The agents of the manifest's nodes, by node name (replaced when a node rejoins).
  std::map<std::string, node_agent_actor> agents;
  /// Retention's clock for the prefix cache's roles in this process; null: the system clock.
  std::shared_ptr<const kvcache::clock> cache_clock;
};

/// Spawns the supervisor, which spawns the shards and workers at once and announces the workers
/// to `router`.
supervisor_actor spawn_supervisor(caf::actor_system& sys, std::shared_ptr<const model_context> ctx,
                                  supervisor_config config, registry_actor registry,
                                  router_actor router);

/// Registers the types above with an actor system's config.
void register_supervisor_types(caf::actor_system_config& cfg);

}  // namespace brigade::deploy
