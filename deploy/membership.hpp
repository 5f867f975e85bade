// The coordinator's view of its nodes: it joins them (the join-secret handshake), watches them
// (heartbeats and a phi accrual suspicion measure), re-dials a node it lost with bounded
// back-off until it answers again, and keeps every node's data plane told where the others are.
// It tells the supervisor what happened (node lost, node back with the roles it still holds,
// node suspected) and the registry each node's state. Local to the coordinator's process.
//
//   joining --handshake--> alive --phi >= suspect_phi--> suspected --heartbeat--> alive
//                            |                              |
//                            +---- connection closed -------+--> lost --re-dial, handshake-->
//                                                                 rejoining --holdings sent-->
//                                                                 alive
#pragma once

#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "actors/atoms.hpp"
#include "actors/payloads.hpp"
#include "actors/registry.hpp"
#include "cluster/node_agent_protocol.hpp"
#include "config/manifest.hpp"
#include "deploy/supervisor.hpp"

namespace brigade::deploy {

/// A node that joined: its agent and its data plane.
struct joined_node {
  std::string name;
  cluster::node_agent_actor agent;
  uint64_t peer_id = 0;          ///< Its data plane's id.
  std::vector<uint8_t> address;  ///< Its data plane's address.
};

/// A fault an operator (or `brigade chaos`) asks for on one node: `peer` names another node (or
/// "*" for every other one) whose data-plane id the coordinator fills in.
struct fault_order {
  std::string node;
  std::string kind;  ///< drop, delay, duplicate, reorder, sever, partition, disk_slow, disk_full,
                     ///< or clear
  std::string peer;  ///< Another node's name, "*" for all, or empty for any.
  double rate = 1.0;
  int64_t ms = 0;
  int64_t for_ms = 0;
  uint64_t seed = 1;
};

/// A node of the cluster, as GET /v1/status shows it.
struct node_status {
  actors::role_status load;  ///< name: the node's; role: "node"
  std::string address;
  std::string state;  ///< "joining", "alive", "suspected", "lost" or "rejoining"
  int64_t since_ms = 0;
  uint32_t joins = 0;
  uint64_t peer_id = 0;  ///< Its data plane's id.
  std::string last_error;
};

/// What the membership accepts (this process only).
using membership_actor = caf::typed_actor<
    /// Joins every node of the manifest; the answer comes once all did, or an error naming the
    /// first that could not (unreachable within the connect timeout, or a wrong secret).
    caf::replies_to<actors::join_atom>::with<std::vector<joined_node>>,
    /// Where node events go from now on.
    caf::reacts_to<actors::supervise_atom, supervisor_actor>,
    /// Every node's state, for GET /v1/status.
    caf::replies_to<actors::status_atom, bool>::with<std::vector<node_status>>,
    /// Fault injection on a node (POST /v1/admin/faults): "" on success, else why not.
    caf::replies_to<actors::fault_atom, fault_order>::with<std::string>>;

/// Spawns the membership of `m`'s nodes; `secret` is the join secret.
membership_actor spawn_membership(caf::actor_system& sys, const config::manifest& m,
                                  std::string secret, actors::registry_actor registry);

}  // namespace brigade::deploy

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(brigade::deploy::joined_node)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<brigade::deploy::joined_node>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(brigade::deploy::fault_order)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(brigade::deploy::node_status)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<brigade::deploy::node_status>)
