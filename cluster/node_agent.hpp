// Spawning the node agent (interface: cluster/node_agent_protocol.hpp).
#pragma once

#include <caf/fwd.hpp>

#include <memory>
#include <string>

#include "cluster/node_agent_protocol.hpp"
#include "cluster/role_census.hpp"

namespace brigade::cluster {

struct node_agent_config {
  std::string name;    ///< Reported to the coordinator.
  std::string secret;  ///< The join secret.
  /// Filled with the roles running here (may be null).
  std::shared_ptr<role_census> census;
};

/// Spawns the agent. It starts this process's data plane when a coordinator joins.
cluster::node_agent_actor spawn_node_agent(caf::actor_system& sys, node_agent_config config);

}  // namespace brigade::cluster
