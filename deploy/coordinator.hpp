// The coordinator's side of joining nodes: connect to each node agent of the manifest, prove
// the join secret both ways, start the nodes' data planes with the manifest's UCX settings and
// tell every node where the others are.
#pragma once

#include <caf/fwd.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "actors/node_agent.hpp"
#include "common/result.hpp"
#include "deploy/manifest.hpp"

namespace brigade::deploy {

struct joined_node {
  std::string name;
  actors::node_agent_actor agent;
  uint64_t peer_id = 0;          ///< Its data plane's id.
  std::vector<uint8_t> address;  ///< Its data plane's address.
};

/// Joins every node of `m`. A node that cannot be reached within `connect_timeout_s`, or that
/// fails the secret check, makes the whole join fail with an error naming it.
result<std::vector<joined_node>> join_nodes(caf::actor_system& sys, const manifest& m,
                                            int connect_timeout_s = 30);

}  // namespace brigade::deploy
