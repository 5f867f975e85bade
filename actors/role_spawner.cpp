#include "actors/role_spawner.hpp"

#include <caf/actor_cast.hpp>
#include <caf/actor_system_config.hpp>

#include "actors/spawn_checks.hpp"
#include "gpu/device_choice.hpp"
#include "model/kv_layout.hpp"

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

// What the role keeps on its device beyond the weights all roles there share: its KV storage, or
// its expert slots.
uint64_t own_device_bytes(const model_context& ctx, const role_spec& spec) {
  const size_t element = ctx.weight_element_bytes();
  switch (kind_of(spec)) {
    case role_kind::expert_shard:
      return static_cast<uint64_t>(config_of<expert_shard_config>(spec).plan.slots.size()) *
             expert_weight_bytes(ctx.config, element);
    case role_kind::prefill: {
      const auto& c = config_of<prefill_worker_config>(spec);
      return kv_storage_bytes(ctx.config, c.kv_tokens, c.block_tokens,
                              model::kv_element(c.kv_dtype));
    }
    case role_kind::decode: {
      const auto& c = config_of<decode_worker_config>(spec);
      return kv_storage_bytes(ctx.config, c.kv_tokens, c.block_tokens,
                              model::kv_element(c.kv_dtype));
    }
    case role_kind::kv_store:
      break;
  }
  return 0;
}

// A role on a CUDA device needs the device here, with room for the shared weights and its own:
// refused before anything is loaded there, naming the role, its node and what was found.
status check_device(const model_context& ctx, const role_spec& spec, const gpu::device_choice& d,
                    const std::string& node) {
  if (!d.cuda) return ok_status();
  const std::string who =
      name_of(spec) + " (" + to_string(kind_of(spec)) + " on node " + node + ")";
  const gpu::device_report report = gpu::probe_cuda();
  if (status present = gpu::check_device_present(d, report, who); !present) return present;
  const gpu::device_info* info = nullptr;
  for (const gpu::device_info& i : report.devices) {
    if (i.index == d.ordinal) info = &i;
  }
  const std::vector<gpu::device_need> needs{
      {"the weights every role on it shares",
       dense_weight_bytes(ctx.config, ctx.weight_element_bytes())},
      {who, own_device_bytes(ctx, spec)}};
  return gpu::check_device_memory(needs, info->memory_bytes, d, info->name);
}

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
                              role_spec spec, const std::string& node) {
  const role_spawner& spawner = spawner_for(kind_of(spec));
  if (spawner.needs_model && ctx) {
    // The spec may come from a peer: its device is read again here.
    auto device = gpu::parse_device(spec.device, name_of(spec) + ".device");
    if (!device) return error(errc::invalid_argument, "cannot spawn " + device.err().message);
    if (status ok = check_device(*ctx, spec, device.value(), node); !ok) return ok.err();
    auto on_device = ctx->on_device(device.value());
    if (!on_device) {
      return error(on_device.err().code, "cannot spawn " + name_of(spec) + " on " + spec.device +
                                             ": " + on_device.err().message);
    }
    ctx = std::move(on_device.value());
  }
  if (status ok = spawner.check(ctx.get(), spec); !ok) return ok.err();
  return spawner.spawn(sys, std::move(ctx), std::move(spec));
}

void register_role_spec_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<role_spec>("brigade::role_spec");
}

}  // namespace brigade::actors
