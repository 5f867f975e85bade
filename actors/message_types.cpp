#include "actors/message_types.hpp"

#include "actors/decode_worker.hpp"
#include "actors/expert_shard.hpp"
#include "actors/kv_store.hpp"
#include "actors/prefill_worker.hpp"
#include "actors/registry.hpp"
#include "actors/role_spawner.hpp"
#include "actors/router.hpp"

namespace brigade::actors {

void register_role_types(caf::actor_system_config& cfg) {
  register_payload_types(cfg);
  register_expert_shard_types(cfg);
  register_kv_store_types(cfg);
  register_prefill_worker_types(cfg);
  register_decode_worker_types(cfg);
  register_router_types(cfg);
  register_registry_types(cfg);
  register_role_spec_types(cfg);
}

}  // namespace brigade::actors
