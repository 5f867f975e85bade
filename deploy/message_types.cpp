#include "deploy/message_types.hpp"

#include "actors/message_types.hpp"
#include "cluster/node_agent_protocol.hpp"
#include "deploy/supervisor.hpp"

namespace brigade::deploy {

void register_message_types(caf::actor_system_config& cfg) {
  actors::register_role_types(cfg);
  cluster::register_node_agent_types(cfg);
  register_supervisor_types(cfg);
}

}  // namespace brigade::deploy
