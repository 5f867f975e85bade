// The registry: the one authoritative list of actors, live and dead, with a version number that
// grows with every change. Introspection reads snapshots; subscribers get every change as an
// event.
#pragma once

#include <caf/actor.hpp>
#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "actors/atoms.hpp"
#include "actors/payloads.hpp"

namespace brigade::actors {

/// One role actor as the registry knows it.
struct actor_entry {
  std::string name;         ///< Stable across restarts: "decode-0".
  std::string role;         ///< "router", "prefill", "decode", "expert_shard", ...
  std::string node;         ///< The node it runs on ("local" in one process).
  uint32_t generation = 0;  ///< 1 for the first spawn, +1 per restart.
  int64_t spawned_ms = 0;   ///< Unix time of the current generation's spawn.
  bool alive = false;
  std::string death_cause;  ///< Why the last generation died; empty if it never did.
  uint32_t restarts = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, actor_entry& x) {
  return f(caf::meta::type_name("actor_entry"), x.name, x.role, x.node, x.generation, x.spawned_ms,
           x.alive, x.death_cause, x.restarts);
}

/// A node of the cluster as the coordinator sees it.
///
///   joining --handshake--> alive <--heartbeats on time--> suspected
///                            |  \--connection closed--> lost --re-dial answered--> rejoining
///                            +<------------------------------------------------------/ (adopted)
struct node_entry {
  std::string name;
  std::string address;
  std::string state;     ///< "joining", "alive", "suspected", "lost" or "rejoining"
  int64_t since_ms = 0;  ///< Unix time of the last change of state.
  uint32_t joins = 0;    ///< Times it joined: 1, plus one per rejoin.
  std::string detail;    ///< Why it changed (a loss's cause, the suspicion level).
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_entry& x) {
  return f(caf::meta::type_name("node_entry"), x.name, x.address, x.state, x.since_ms, x.joins,
           x.detail);
}

struct registry_snapshot {
  uint64_t version = 0;
  std::vector<actor_entry> actors;
  std::vector<node_entry> nodes;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, registry_snapshot& x) {
  return f(caf::meta::type_name("registry_snapshot"), x.version, x.actors, x.nodes);
}

/// A change: "spawned", "died", "restarted", "adopted" or "gave_up", with the entry after it.
struct registry_event {
  uint64_t version = 0;
  std::string kind;
  actor_entry entry;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, registry_event& x) {
  return f(caf::meta::type_name("registry_event"), x.version, x.kind, x.entry);
}

/// Where the registry sends every change after a subscription.
using registry_listener_actor = caf::typed_actor<caf::reacts_to<registry_event>>;

struct registry_status {
  role_status load;
  uint64_t version = 0;
  uint64_t actors = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, registry_status& x) {
  return f(caf::meta::type_name("registry_status"), x.load, x.version, x.actors);
}

using registry_actor = caf::typed_actor<
    /// A new generation of `entry.name` is alive. Replies with the new version.
    caf::replies_to<register_atom, actor_entry>::with<uint64_t>,
    /// `name` died of `cause`; `final` when the supervisor will not restart it.
    caf::replies_to<death_atom, std::string, std::string, bool>::with<uint64_t>,
    /// `name`'s current generation, which lost contact with the coordinator, is its again
    /// (adopted back on `node`): alive, same generation.
    caf::replies_to<adopt_atom, std::string, std::string>::with<uint64_t>,
    /// A node changed state.
    caf::replies_to<node_atom, node_entry>::with<uint64_t>,
    caf::replies_to<snapshot_atom>::with<registry_snapshot>,
    /// Sends every later registry_event to the listener.
    caf::reacts_to<subscribe_atom, registry_listener_actor>,
    caf::replies_to<status_atom>::with<registry_status>>;

registry_actor spawn_registry(caf::actor_system& sys);

/// Registers the types above with an actor system's config.
void register_registry_types(caf::actor_system_config& cfg);

}  // namespace brigade::actors
