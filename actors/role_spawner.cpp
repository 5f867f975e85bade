#include "actors/role_spawner.hpp"

#include <caf/actor_cast.hpp>
#include <caf/actor_system_config.hpp>

#include "actors/spawn_checks.hpp"

namespace brigade::actors {
namespace {

template <class Config>
const Config& config_of(const role_spec& spec) {
  return caf::get<Config>(spec.config);
}

status needs_context(const model_context* ctx) {
  if (ctx) return ok_status();
  return error(errc::internal, "no model is loaded to check the role against");
}

const role_spawner table[] = {
    {role_kind::expert_shard, true,
     [](const model_context* ctx, const role_spec& spec) {
       if (status ok = needs_context(ctx); !ok) return ok;
       return check_spawn(ctx->config, config_of<expert_shard_config>(spec));
     },
     [](caf::actor_system& sys, std::shared_ptr<const model_context> ctx, role_spec spec) {
       return caf::actor_cast<caf::actor>(spawn_expert_shard(
           sys, std::move(ctx), std::move(caf::get<expert_shard_config>(spec.config))));
     }},
    {role_kind::kv_store, false, [](const model_context*, const role_spec&) { return ok_status(); },
     [](caf::actor_system& sys, std::shared_ptr<const model_context>, role_spec spec) {
       return caf::actor_cast<caf::actor>(
           spawn_kv_store(sys, std::move(caf::get<kv_store_config>(spec.config))));
     }},
    {role_kind::prefill, true,
     [](const model_context* ctx, const role_spec& spec) {
       if (status ok = needs_context(ctx); !ok) return ok;
       return check_spawn(ctx->config, config_of<prefill_worker_config>(spec), spec.shards);
     },
     [](caf::actor_system& sys, std::shared_ptr<const model_context> ctx, role_spec spec) {
       return caf::actor_cast<caf::actor>(spawn_prefill_worker(
           sys, std::move(ctx), std::move(caf::get<prefill_worker_config>(spec.config)),
           std::move(spec.shards)));
     }},
    {role_kind::decode, true,
     [](const model_context* ctx, const role_spec& spec) {
       if (status ok = needs_context(ctx); !ok) return ok;
       const auto& config = config_of<decode_worker_config>(spec);
       if (status ok = check_spawn(ctx->config, config, spec.shards); !ok) return ok;
       return check_draft(*ctx, config);
     },
     [](caf::actor_system& sys, std::shared_ptr<const model_context> ctx, role_spec spec) {
       return caf::actor_cast<caf::actor>(spawn_decode_worker(
           sys, std::move(ctx), std::move(caf::get<decode_worker_config>(spec.config)),
           std::move(spec.shards)));
     }},
};

}  // namespace

role_kind kind_of(const role_spec& spec) {
  return static_cast<role_kind>(spec.config.index());
}

const std::string& name_of(const role_spec& spec) {
  return caf::visit([](const auto& config) -> const std::string& { return config.name; },
                    spec.config);
}

const role_spawner& spawner_for(role_kind kind) {
  return table[static_cast<size_t>(kind)];
}

result<caf::actor> spawn_role(caf::actor_system& sys, std::shared_ptr<const model_context> ctx,
                              role_spec spec) {
  const role_spawner& spawner = spawner_for(kind_of(spec));
  if (status ok = spawner.check(ctx.get(), spec); !ok) return ok.err();
  return spawner.spawn(sys, std::move(ctx), std::move(spec));
}

void register_role_spec_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<role_spec>("brigade::role_spec");
}

}  // namespace brigade::actors
