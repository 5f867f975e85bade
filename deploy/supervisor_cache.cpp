// The supervisor's part in the prefix cache: the KV store role and the prefill workers' cache
// settings. The rest of supervision (supervisor.cpp) treats the KV store like any child.
#include <caf/all.hpp>

#include "actors/kv_store.hpp"
#include "common/log.hpp"
#include "deploy/supervisor_state.hpp"
#include "gpu/cpu/kernel_path.hpp"
#include "model/checkpoint_identity.hpp"
#include "model/kv_layout.hpp"

namespace brigade::deploy {
namespace {

std::shared_ptr<const kvcache::clock> cache_clock(const supervisor_state& st) {
  if (st.config.cache_clock) return st.config.cache_clock;
  static const auto system = std::make_shared<const kvcache::system_clock>();
  return system;
}

// The KV store on `node` if it runs; a null handle otherwise.
kv_store_actor live_store(const supervisor_state& st, const std::string& node) {
  for (const auto& [name, c] : st.children) {
    if (c.role == role_kind::kv_store && c.alive && c.node == node) {
      return caf::actor_cast<kv_store_actor>(c.handle);
    }
  }
  return kv_store_actor{};
}

// The KV cache names a model by its checkpoint's content, not by its path, so that weights
// replaced in place never find the old weights' blocks (on SSD, across restarts). Computed once
// per loaded model; a coordinator that holds only the config computes it from its own copy of
// the files all the same. Without an id the store refuses the empty one and serves without
// tiers.
std::string kv_model_id(const supervisor_state& st) {
  auto identity = model::checkpoint_identity::shared(st.ctx->dir, st.ctx);
  if (identity) return identity.value()->id();
  log::error("supervisor", "the KV store serves without tiers: no content id for " + st.ctx->dir +
                               ": " + identity.err().message);
  return std::string();
}

}  // namespace

kv_store_config kv_store_config_for(supervisor_pointer self, const supervised_child& c) {
  auto& st = self->state;
  const config::manifest& m = st.config.manifest;
  const auto& mc = st.ctx->config;
  kv_store_config cfg;
  cfg.name = c.name;
  cfg.model_id = kv_model_id(st);
  cfg.layers = mc.num_layers;
  cfg.block_tokens = m.block_tokens;
  cfg.kv_heads = mc.num_kv_heads;
  cfg.head_dim = mc.head_dim;
  cfg.values_alias_keys = mc.kv_values_alias_keys();
  cfg.kv_dtype = model::kv_dtype_name(m.kv_dtype);
  // Every node runs the coordinator's numerics (membership refuses others), so it is ours.
  cfg.numerics = gpu::cpu::process_numerics_name();
  cfg.host_bytes = m.kv_cache.host_bytes;
  cfg.ssd_bytes = m.kv_cache.ssd_bytes;
  cfg.ssd_dir = m.kv_cache.ssd_dir;
  cfg.hash_key_id = st.ctx->block_hasher->key_id();
  cfg.scenarios = m.kv_cache.scenarios;
  if (c.node == "local") cfg.clock = cache_clock(st);
  return cfg;
}

void announce_kv_store(supervisor_pointer self, const supervised_child& store) {
  for (auto& [name, other] : self->state.children) {
    if (other.alive && other.role == role_kind::prefill && other.node == store.node) {
      self->send(caf::actor_cast<prefill_worker_actor>(other.handle), store_atom_v,
                 caf::actor_cast<kv_store_actor>(store.handle));
    }
  }
}

void configure_prefill_cache(supervisor_pointer self, prefill_worker_config& cfg,
                             const supervised_child& c) {
  auto& st = self->state;
  const config::manifest& m = st.config.manifest;
  const auto& mc = st.ctx->config;
  cfg.index = c.index;
  cfg.reports = st.router;
  prefill_cache_config& cc = cfg.cache;
  cc.enabled = m.kv_cache.enabled;
  const uint64_t block_bytes =
      mc.kv_bytes_per_token(gpu::dtype_size(m.kv_dtype)) * static_cast<uint64_t>(m.block_tokens);
  // A budget below one block still keeps one: 0 is reserved for "the whole pool".
  cc.capacity_blocks =
      m.kv_cache.pool_bytes == 0 ? 0 : std::max<size_t>(1, m.kv_cache.pool_bytes / block_bytes);
  cc.scenarios = m.kv_cache.scenarios;
  cc.clock = cache_clock(st);
  cc.store = live_store(st, c.node);
}

}  // namespace brigade::deploy
