#include "actors/message_types.hpp"

#include <caf/all.hpp>

#include "actors/cache_report.hpp"
#include "actors/decode_worker.hpp"
#include "actors/expert_shard.hpp"
#include "actors/kv_store.hpp"
#include "actors/node_agent.hpp"
#include "actors/prefill_worker.hpp"
#include "actors/registry.hpp"
#include "actors/router.hpp"
#include "actors/shard_set.hpp"
#include "actors/supervisor.hpp"

namespace brigade::actors {

void register_message_types(caf::actor_system_config& cfg) {
  // Payloads.
  cfg.add_message_type<model::sampling_params>("brigade::sampling_params");
  cfg.add_message_type<role_status>("brigade::role_status");
  cfg.add_message_type<std::vector<role_status>>("std::vector<brigade::role_status>");
  cfg.add_message_type<generation_params>("brigade::generation_params");
  cfg.add_message_type<token_update>("brigade::token_update");
  cfg.add_message_type<std::vector<token_update>>("std::vector<brigade::token_update>");
  cfg.add_message_type<job_failed>("brigade::job_failed");
  cfg.add_message_type<prefill_job>("brigade::prefill_job");
  cfg.add_message_type<slot_assignment>("brigade::slot_assignment");
  cfg.add_message_type<weight_source>("brigade::weight_source");
  cfg.add_message_type<shard_plan>("brigade::shard_plan");
  cfg.add_message_type<load_sample>("brigade::load_sample");
  cfg.add_message_type<expert_layout>("brigade::expert_layout");
  cfg.add_message_type<shard_set>("brigade::shard_set");
  cfg.add_message_type<expert_shard_config>("brigade::expert_shard_config");
  cfg.add_message_type<decode_worker_config>("brigade::decode_worker_config");
  cfg.add_message_type<prefill_worker_config>("brigade::prefill_worker_config");
  cfg.add_message_type<prefill_cache_report>("brigade::prefill_cache_report");
  cfg.add_message_type<kv_lookup>("brigade::kv_lookup");
  cfg.add_message_type<kv_found>("brigade::kv_found");
  cfg.add_message_type<kv_demotion>("brigade::kv_demotion");
  cfg.add_message_type<kv_store_config>("brigade::kv_store_config");
  cfg.add_message_type<actor_entry>("brigade::actor_entry");
  cfg.add_message_type<registry_snapshot>("brigade::registry_snapshot");
  cfg.add_message_type<node_entry>("brigade::node_entry");
  cfg.add_message_type<std::vector<node_entry>>("std::vector<brigade::node_entry>");
  cfg.add_message_type<registry_event>("brigade::registry_event");
  cfg.add_message_type<node_hello>("brigade::node_hello");
  cfg.add_message_type<data_plane_settings>("brigade::data_plane_settings");
  cfg.add_message_type<node_joined>("brigade::node_joined");
  cfg.add_message_type<peer_info>("brigade::peer_info");
  cfg.add_message_type<held_role>("brigade::held_role");
  cfg.add_message_type<std::vector<held_role>>("std::vector<brigade::held_role>");
  cfg.add_message_type<node_fault>("brigade::node_fault");
  cfg.add_message_type<std::vector<peer_info>>("std::vector<brigade::peer_info>");
  cfg.add_message_type<std::vector<uint8_t>>("std::vector<uint8_t>");
  cfg.add_message_type<std::vector<int32_t>>("std::vector<int32_t>");
  cfg.add_message_type<std::vector<std::vector<int64_t>>>("std::vector<std::vector<int64_t>>");
  // Handles.
  cfg.add_message_type<expert_shard_actor>("brigade::expert_shard_actor");
  cfg.add_message_type<std::vector<expert_shard_actor>>("std::vector<brigade::expert_shard_actor>");
  cfg.add_message_type<decode_worker_actor>("brigade::decode_worker_actor");
  cfg.add_message_type<prefill_worker_actor>("brigade::prefill_worker_actor");
  cfg.add_message_type<router_actor>("brigade::router_actor");
  cfg.add_message_type<registry_actor>("brigade::registry_actor");
  cfg.add_message_type<supervisor_actor>("brigade::supervisor_actor");
  cfg.add_message_type<layout_ack_actor>("brigade::layout_ack_actor");
  cfg.add_message_type<load_sink_actor>("brigade::load_sink_actor");
  cfg.add_message_type<node_agent_actor>("brigade::node_agent_actor");
  cfg.add_message_type<kv_store_actor>("brigade::kv_store_actor");
}

}  // namespace brigade::actors
