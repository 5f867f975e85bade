#include "actors/payloads.hpp"

#include <caf/actor_system_config.hpp>

#include "actors/cache_report.hpp"
#include "actors/shard_set.hpp"

namespace brigade::actors {

void register_payload_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<model::sampling_params>("brigade::sampling_params");
  cfg.add_message_type<model::position_logprobs>("brigade::position_logprobs");
  cfg.add_message_type<role_status>("brigade::role_status");
  cfg.add_message_type<std::vector<role_status>>("std::vector<brigade::role_status>");
  cfg.add_message_type<generation_params>("brigade::generation_params");
  cfg.add_message_type<token_update>("brigade::token_update");
  cfg.add_message_type<std::vector<token_update>>("std::vector<brigade::token_update>");
  cfg.add_message_type<job_failed>("brigade::job_failed");
  cfg.add_message_type<prefill_cache_report>("brigade::prefill_cache_report");
  cfg.add_message_type<eplb::layout>("brigade::expert_layout");
  cfg.add_message_type<shard_set>("brigade::shard_set");
  cfg.add_message_type<layout_ack_actor>("brigade::layout_ack_actor");
  cfg.add_message_type<std::vector<uint8_t>>("std::vector<uint8_t>");
  cfg.add_message_type<std::vector<int32_t>>("std::vector<int32_t>");
  cfg.add_message_type<std::vector<std::vector<int64_t>>>("std::vector<std::vector<int64_t>>");
}

}  // namespace brigade::actors
