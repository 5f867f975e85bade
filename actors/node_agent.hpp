// The node agent's interface: what `brigade node` runs. A coordinator connects to it, both
// prove the join secret, and then the coordinator spawns role actors on that node through it
// and tells it where the other nodes' data planes are. Implemented in cluster/node_agent.cpp.
//
//   listening --hello/join (proofs match)--> joined: spawns, peers, peer_down accepted
//            \--wrong proof--> refused, logged; nothing is ever spawned for that peer
#pragma once

#include <caf/fwd.hpp>
#include <caf/node_id.hpp>
#include <caf/replies_to.hpp>
#include <caf/type_id.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "actors/decode_worker.hpp"
#include "actors/expert_shard.hpp"
#include "actors/kv_store.hpp"
#include "actors/payloads.hpp"
#include "actors/prefill_worker.hpp"
#include "actors/shard_set.hpp"

CAF_ADD_ATOM(brigade, brigade::actors, hello_atom, "hello")
CAF_ADD_ATOM(brigade, brigade::actors, join_atom, "join")
CAF_ADD_ATOM(brigade, brigade::actors, spawn_atom, "spawn")
CAF_ADD_ATOM(brigade, brigade::actors, peers_atom, "peers")
CAF_ADD_ATOM(brigade, brigade::actors, peer_down_atom, "peerdown")

namespace brigade::actors {

/// A node's answer to hello: who it is, its nonce and its proof of the secret.
struct node_hello {
  std::string name;
  std::string nonce;
  std::string proof;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_hello& x) {
  return f(caf::meta::type_name("node_hello"), x.name, x.nonce, x.proof);
}

/// How the coordinator wants the data plane: the manifest's UCX settings.
struct data_plane_settings {
  std::string tls;
  std::string net_devices;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, data_plane_settings& x) {
  return f(caf::meta::type_name("data_plane_settings"), x.tls, x.net_devices);
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

using node_agent_actor = caf::typed_actor<
    /// The coordinator's nonce in; the node's name, nonce and proof out.
    caf::replies_to<hello_atom, std::string>::with<node_hello>,
    /// The coordinator's proof and the data plane's settings. A right proof admits the
    /// coordinator and starts the data plane; a wrong one is an error and is logged.
    caf::replies_to<join_atom, std::string, data_plane_settings>::with<node_joined>,
    /// Spawns a role actor here, loading the model from the given directory on first use.
    caf::replies_to<spawn_atom, std::string, expert_shard_config>::with<expert_shard_actor>,
    caf::replies_to<spawn_atom, std::string, decode_worker_config,
                    shard_set>::with<decode_worker_actor>,
    caf::replies_to<spawn_atom, std::string, prefill_worker_config,
                    shard_set>::with<prefill_worker_actor>,
    /// The node's KV store: its prefill workers' host-memory and SSD tiers.
    caf::replies_to<spawn_atom, kv_store_config>::with<kv_store_actor>,
    /// Every node's data plane; the agent connects to those it does not know yet.
    caf::replies_to<peers_atom, std::vector<peer_info>>::with<bool>,
    /// A node is gone: data in flight to it fails now.
    caf::reacts_to<peer_down_atom, uint64_t, std::string>,
    caf::replies_to<status_atom>::with<role_status>>;

}  // namespace brigade::actors
