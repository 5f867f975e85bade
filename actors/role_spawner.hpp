// The one table of how each kind of role is checked and spawned, used alike by the supervisor
// (roles in its own process) and node agents (roles on their node, from a coordinator's request).
//
//   role_spec (a role's config, and for workers the shard set they start with)
//     --check (a spec from another node is the peer's word)--> refused, with the field at fault
//     --spawn--> the role actor, as caf::actor: its kind names its handle type
#pragma once

#include <caf/actor.hpp>
#include <caf/fwd.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/variant.hpp>

#include <memory>
#include <string>

#include "actors/decode_worker.hpp"
#include "actors/expert_shard.hpp"
#include "actors/kv_store.hpp"
#include "actors/model_context.hpp"
#include "actors/prefill_worker.hpp"
#include "actors/role_kind.hpp"
#include "actors/shard_set.hpp"
#include "common/result.hpp"

namespace brigade::actors {

/// Everything needed to spawn one role instance. The alternatives follow role_kind's order.
struct role_spec {
  caf::variant<expert_shard_config, kv_store_config, prefill_worker_config, decode_worker_config>
      config;
  shard_set shards;  ///< Workers: the shard set they start with (empty for other roles).
  /// Where it computes: "cpu" or "cuda:N" (gpu::parse_device), read again where it is spawned.
  std::string device = "cpu";
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, role_spec& x) {
  return f(caf::meta::type_name("role_spec"), x.config, x.shards, x.device);
}

role_kind kind_of(const role_spec& spec);
const std::string& name_of(const role_spec& spec);

struct role_spawner {
  role_kind kind;
  /// Needs the model's weights (every role but the KV store, which holds opaque blocks).
  bool needs_model;
  /// OK when the spec fits `model` (null when the role needs none): counts, sizes and layouts a
  /// peer sent are checked before anything is allocated for them.
  status (*check)(const model_context* ctx, const role_spec& spec);
  caf::actor (*spawn)(caf::actor_system& sys, std::shared_ptr<const model_context> ctx,
                      role_spec spec);
};

/// The spawner of `kind`.
const role_spawner& spawner_for(role_kind kind);

/// Checks and spawns `spec` in this process, on the context of `ctx`'s model on spec.device
/// (model_context::on_device: loaded there the first time); an error naming what was wrong
/// otherwise, the device's absence or too small a memory included. `node` names this process
/// in those errors ("local", or the node's name).
result<caf::actor> spawn_role(caf::actor_system& sys, std::shared_ptr<const model_context> ctx,
                              role_spec spec, const std::string& node = "local");

void register_role_spec_types(caf::actor_system_config& cfg);

}  // namespace brigade::actors
