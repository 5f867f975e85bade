// The node agent's interface: what `brigade node` runs. A coordinator connects to it, both
// prove the join secret, and then the coordinator spawns role actors on that node through it
// and tells it where the other nodes' data planes are. Implemented in cluster/node_agent.cpp.
//
//   listening --hello/join (proofs match)--> joined: spawns, peers, peer_down accepted
//            \--wrong proof--> refused, logged; nothing is ever spawned for that peer
//
// The roles a coordinator spawned here, as the node sees its coordinator:
//
//   in contact --connection lost--> held (grace_ms) --same coordinator joins again--> adopt:
//       ^                              |                 kept roles in contact, others stop
//       +------------------------------+
//                                      \--grace over, or another coordinator joins--> stopped
//   in contact --its supervisor exits (shutdown, kill)--> stopped
#pragma once

#include <caf/fwd.hpp>
#include <caf/node_id.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "actors/atoms.hpp"
#include "actors/payloads.hpp"
#include "actors/role_kind.hpp"
#include "actors/role_spawner.hpp"

namespace brigade::cluster {

using actors::role_kind;

/// A node's answer to hello: who it is, its nonce and its proof of the secret, and the numerics
/// class its CPU kernels compute in (gpu/cpu/kernel_path.hpp: "f32" or "bf16-dot"), which must be
/// the coordinator's for one answer across topologies to hold.
struct node_hello {
  std::string name;
  std::string nonce;
  std::string proof;
  std::string numerics;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_hello& x) {
  return f(caf::meta::type_name("node_hello"), x.name, x.nonce, x.proof, x.numerics);
}

/// How the coordinator wants the node: the manifest's UCX settings for the data plane, and how
/// long the node keeps its roles when it loses contact with the coordinator.
struct data_plane_settings {
  std::string tls;
  std::string net_devices;
  int64_t grace_ms = 30000;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, data_plane_settings& x) {
  return f(caf::meta::type_name("data_plane_settings"), x.tls, x.net_devices, x.grace_ms);
}

/// A role a node holds for a coordinator (alive, in contact or within its grace period).
struct held_role {
  std::string name;  ///< "decode-0"
  role_kind role = role_kind::expert_shard;
  caf::actor handle;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, held_role& x) {
  return f(caf::meta::type_name("held_role"), x.name, x.role, x.handle);
}

/// A fault to switch on in this node's process for a while: a data-plane rule in the text form
/// of transport::fault_points ("drop rate=0.05 to=ID"), or a disk rule of the KV store's SSD
/// tier ("disk slow ms=50", "disk full").
struct node_fault {
  std::string name;    ///< Replaces a fault of the same name; "" with an empty spec clears all.
  std::string spec;    ///< Empty: clears the fault called `name`.
  int64_t for_ms = 0;  ///< Cleared by itself after this long; 0: until cleared.
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_fault& x) {
  return f(caf::meta::type_name("node_fault"), x.name, x.spec, x.for_ms);
}

/// A joined node's data plane, which the coordinator tells the other nodes about.
struct node_joined {
  uint64_t peer_id = 0;          ///< Its data plane's transport id.
  std::vector<uint8_t> address;  ///< Its data plane's address bytes.
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_joined& x) {
  return f(caf::meta::type_name("node_joined"), x.peer_id, x.address);
}

/// A node of the cluster, as the coordinator tells every node about the others.
struct peer_info {
  uint64_t id = 0;
  std::string name;
  caf::node_id node;
  std::vector<uint8_t> address;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, peer_info& x) {
  return f(caf::meta::type_name("peer_info"), x.id, x.name, x.node, x.address);
}

/// Who spawned roles on a node (a coordinator's supervisor), as the node sees it: told when the
/// node leaves.
using node_owner_actor = caf::typed_actor<caf::reacts_to<actors::leave_atom, std::string>>;

/// A node agent's status: the roles it runs and for how many coordinators.
struct node_agent_status {
  actors::role_status load;  ///< in_flight: roles running here
  std::string model;         ///< The model directory it loaded ("" before the first spawn).
  int32_t coordinators = 0;  ///< Coordinators that proved the join secret.
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_agent_status& x) {
  return f(caf::meta::type_name("node_agent_status"), x.load, x.model, x.coordinators);
}

using node_agent_actor = caf::typed_actor<
    /// The coordinator's nonce in; the node's name, nonce and proof out.
    caf::replies_to<actors::hello_atom, std::string>::with<node_hello>,
    /// The coordinator's proof and the data plane's settings. A right proof admits the
    /// coordinator and starts the data plane; a wrong one is an error and is logged.
    caf::replies_to<actors::join_atom, std::string, data_plane_settings>::with<node_joined>,
    /// Spawns a role actor here (actors/role_spawner.hpp), loading the model from the given
    /// directory on first use. The answer's type is the one the spec's kind names.
    caf::replies_to<actors::spawn_atom, std::string, actors::role_spec>::with<caf::actor>,
    /// Every node's data plane; the agent connects to those it does not know yet.
    caf::replies_to<actors::peers_atom, std::vector<peer_info>>::with<bool>,
    /// A node is gone: data in flight to it fails now.
    caf::reacts_to<actors::peer_down_atom, uint64_t, std::string>,
    /// The coordinator's heartbeat; the answer is the node's monotonic clock in milliseconds.
    caf::replies_to<actors::ping_atom>::with<int64_t>,
    /// The roles this node holds for coordinators of the asking process.
    caf::replies_to<actors::holdings_atom>::with<std::vector<held_role>>,
    /// A coordinator that contact was lost with is back: the named roles are its again (under
    /// the given supervisor, which the node monitors), its other roles here stop. Replies with
    /// the number of roles kept.
    caf::replies_to<actors::adopt_atom, node_owner_actor, std::vector<std::string>>::with<int32_t>,
    /// Fault injection in this node's process (from an admitted coordinator only).
    caf::replies_to<actors::fault_atom, node_fault>::with<bool>,
    /// From this process only (SIGTERM): tells each coordinator the node is leaving, stops the
    /// roles (their work fails over to other nodes), then the agent itself.
    caf::reacts_to<actors::leave_atom>,
    caf::replies_to<actors::status_atom>::with<node_agent_status>>;

/// Registers the types above with an actor system's config (coordinators and nodes alike).
void register_node_agent_types(caf::actor_system_config& cfg);

}  // namespace brigade::cluster
