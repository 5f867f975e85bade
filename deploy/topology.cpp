#include "deploy/topology.hpp"

#include <caf/all.hpp>

#include <chrono>
#include <set>

#include "actors/model_context.hpp"
#include "actors/registry.hpp"
#include "actors/router.hpp"
#include "actors/shard_set.hpp"
#include "actors/spawn_checks.hpp"
#include "cluster/join_secret.hpp"
#include "common/thread_pool.hpp"
#include "config/middleman_config.hpp"
#include "config/role_placement.hpp"
#include "config/scheduler_config.hpp"
#include "deploy/device_check.hpp"
#include "deploy/group_placement_check.hpp"
#include "deploy/membership.hpp"
#include "deploy/message_types.hpp"
#include "deploy/role_configs.hpp"
#include "deploy/router_service.hpp"
#include "deploy/status_json.hpp"
#include "deploy/supervisor.hpp"
#include "kvcache/hash_key.hpp"

namespace brigade::deploy {

using namespace brigade::actors;

namespace {

std::unique_ptr<caf::actor_system_config> make_config(const config::manifest& m) {
  auto cfg = std::make_unique<caf::actor_system_config>();
  config::configure_scheduler(*cfg);
  cfg->set("logger.verbosity", caf::atom("quiet"));
  register_message_types(*cfg);
  if (!m.nodes.empty()) {
    config::configure_middleman(*cfg, m.liveness.heartbeat_ms, m.liveness.dead_after_ms);
  }
  return cfg;
}

// Joins every node of the manifest through the membership, which keeps watching them.
result<std::vector<joined_node>> join_nodes(caf::actor_system& sys,
                                            const membership_actor& membership) {
  caf::scoped_actor self{sys};
  std::vector<joined_node> out;
  std::string failure;
  self->request(membership, std::chrono::seconds(60), join_atom_v)
      .receive([&](std::vector<joined_node>& joined) { out = std::move(joined); },
               [&](caf::error& err) { failure = sys.render(err); });
  if (!failure.empty()) return error(errc::unavailable, failure);
  return out;
}

// The key prefix-cache blocks are hashed with (kvcache/hash_key.hpp): from the join secret when
// roles run on nodes, from the SSD tier's key file when there is one, fresh otherwise.
result<kvcache::hash_key_bytes> deployment_block_key(const config::manifest& m) {
  if (!m.nodes.empty()) {
    auto secret = cluster::read_join_secret(m.join_secret_file);
    if (!secret) return secret.err();
    return cluster::block_hash_key(secret.value());
  }
  if (m.kv_cache.enabled && m.kv_cache.ssd_bytes > 0 && !m.kv_cache.ssd_dir.empty()) {
    auto key = kvcache::load_or_create_hash_key(m.kv_cache.ssd_dir);
    if (!key) return error(key.err().code, m.source + ": kv_cache.ssd_dir: " + key.err().message);
    return key;
  }
  return kvcache::random_hash_key();
}

// A draft model the manifest names is loaded now, in one process: a missing directory or a
// draft of another tokenizer is then an error of the manifest's field, not decode workers that
// cannot start. On nodes, each node checks its own when it spawns a decode worker.
status check_draft_model(const config::manifest& m, const model_context& ctx) {
  const model::speculation_options& o = m.decode.speculation;
  if (!o.enabled() || o.draft != model::draft_kind::model) return ok_status();
  auto loaded = ctx.draft(o.draft_model);
  if (loaded) return ok_status();
  return error(loaded.err().code, m.source + ": field 'roles.decode.speculation.draft_model': " +
                                      loaded.err().message);
}

// In one process: refuses devices that are absent or too small before anything is loaded, then
// loads the weights onto every device the roles use, so that a model that cannot load fails the
// start rather than each role's spawn. Returns the decode workers' context (a draft model loads
// beside their weights).
result<std::shared_ptr<const model_context>> load_local_devices(
    const config::manifest& m, const model_context& base, const eplb::layout& layout,
    const model::load_progress& progress) {
  if (status devices = check_local_devices_here(m, base.config, layout); !devices) {
    return devices.err();
  }
  // A device's failure names the device; on the CPU the loader's own message says it all.
  auto on = [&](const gpu::device_choice& d) -> result<std::shared_ptr<const model_context>> {
    auto loaded = base.on_device(d, progress);
    if (loaded || !d.cuda) return loaded;
    return error(loaded.err().code, m.model + " on " + d.to_string() + ": " + loaded.err().message);
  };
  std::set<gpu::device_choice> devices{m.experts.device, m.prefill.device};
  for (const gpu::device_choice& d : devices) {
    if (d == m.decode.device) continue;
    if (auto loaded = on(d); !loaded) return loaded.err();
  }
  return on(m.decode.device);
}

std::string last_path_part(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/')
    p.pop_back();
  const auto slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

}  // namespace

// Expert round trips between this process's workers and shards leave the compute pool idle
// for 100-300 us between a step's layers; workers that poll that long start the next layer
// without a wake-up (thread_pool.hpp). Measured on the default topology: docs/cpu_kernels.md.
constexpr std::chrono::microseconds actor_spin_window{300};

struct topology::impl {
  thread_pool::spin_window spin{actor_spin_window};
  std::shared_ptr<const model_context> ctx;
  std::unique_ptr<caf::actor_system_config> cfg;
  std::unique_ptr<caf::actor_system> sys;
  registry_actor registry;
  router_actor router;
  supervisor_actor supervisor;
  membership_actor membership;
  std::unique_ptr<router_service> service;

  ~impl() {
    if (service) service->stop();
    if (sys) {
      if (membership) caf::anon_send_exit(membership, caf::exit_reason::user_shutdown);
      caf::anon_send_exit(supervisor, caf::exit_reason::user_shutdown);
      caf::anon_send_exit(router, caf::exit_reason::user_shutdown);
      caf::anon_send_exit(registry, caf::exit_reason::user_shutdown);
      sys->await_all_actors_done();
      // Pending delayed messages and request timeouts hold their actors until CAF's clock is
      // destroyed, which comes after CAF waits for detached actors to be destroyed: drop them.
      sys->clock().cancel_all();
    }
  }
};

topology::topology(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
topology::~topology() = default;

result<std::unique_ptr<topology>> topology::start(
    const config::manifest& m, const model::load_progress& progress,
    std::shared_ptr<const kvcache::clock> cache_clock) {
  const bool distributed = !m.nodes.empty();
  auto block_key = deployment_block_key(m);
  if (!block_key) return block_key.err();
  // A coordinator only routes: the nodes load the weights. In one process, the base context
  // holds the config, and the weights load once per device the roles use (model_context.hpp).
  auto ctx = model_context::load_config(m.model, *block_key);
  if (!ctx) return ctx.err();
  const model::model_config& c = ctx.value()->config;
  if (!c.is_moe()) {
    return error(errc::unsupported, m.model +
                                        " is a dense model; the actor topology serves "
                                        "mixture-of-experts models");
  }
  auto layout = initial_layout(c, m.experts.count, m.experts.slots_per_shard);
  if (!layout) return error(errc::invalid_argument, m.source + ": " + layout.err().message);
  if (status groups = check_group_placement(m, c, layout.value()); !groups) {
    return error(errc::invalid_argument, m.source + ": " + groups.err().message);
  }
  if (!distributed) {
    auto loaded = load_local_devices(m, *ctx.value(), layout.value(), progress);
    if (!loaded) return loaded.err();
    if (status draft = check_draft_model(m, *loaded.value()); !draft) return draft.err();
  }
  // Workers allocate their KV storage as they start: found too large there, they would crash
  // and restart until given up while the server looked up. In one process all workers share
  // its memory; on nodes, each node checks its own spawns.
  if (!distributed) {
    // Workers on a CUDA device keep their KV there (check_local_devices counted it).
    const uint64_t decode_kv = m.decode.device.cuda ? 0 : static_cast<uint64_t>(m.decode.count);
    const uint64_t prefill_kv = m.prefill.device.cuda ? 0 : static_cast<uint64_t>(m.prefill.count);
    const uint64_t kv_here =
        decode_kv * kv_storage_bytes(c, m.decode.kv_tokens, m.block_tokens, m.kv_dtype) +
        prefill_kv * kv_storage_bytes(c, m.prefill.kv_tokens, m.block_tokens, m.kv_dtype);
    if (status fits = check_kv_fits(kv_here,
                                    "the workers' KV storage (roles.decode.kv_tokens and "
                                    "roles.prefill.kv_tokens, times their counts)");
        !fits) {
      return error(errc::invalid_argument, m.source + ": " + fits.err().message);
    }
  }
  auto p = std::make_unique<impl>();
  p->ctx = ctx.value();
  p->cfg = make_config(m);
  p->sys = std::make_unique<caf::actor_system>(*p->cfg);
  supervisor_config sc{m, layout.value(), {}, {}, std::move(cache_clock)};
  p->registry = spawn_registry(*p->sys);
  if (distributed) {
    auto secret = cluster::read_join_secret(m.join_secret_file);
    if (!secret) return secret.err();
    p->membership = spawn_membership(*p->sys, m, secret.value(), p->registry);
    auto joined = join_nodes(*p->sys, p->membership);
    if (!joined) return joined.err();
    sc.placement = config::place(m);
    for (const auto& j : joined.value())
      sc.agents[j.name] = j.agent;
  }
  p->router = spawn_router(*p->sys, router_config_for(m), p->ctx->block_hasher);
  actor_entry router_entry{"router", "router", "local", 1, 0, true, "", 0};
  caf::anon_send(p->registry, register_atom_v, router_entry);
  p->supervisor = spawn_supervisor(*p->sys, p->ctx, std::move(sc), p->registry, p->router);
  if (p->membership) caf::anon_send(p->membership, supervise_atom_v, p->supervisor);
  serve::service_info info;
  info.model_name = m.served_model_name.empty() ? last_path_part(m.model) : m.served_model_name;
  info.model_type = c.model_type;
  info.context_tokens = c.max_positions;
  info.vocab_size = c.vocab_size;
  for (const auto& s : m.kv_cache.scenarios)
    info.scenarios.push_back(s.name);
  info.prefix_cache = m.kv_cache.enabled;
  info.created_unix_s = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
  p->service = std::make_unique<router_service>(*p->sys, p->router, p->registry, p->supervisor,
                                                p->membership, info);
  return std::unique_ptr<topology>(new topology(std::move(p)));
}

serve::inference_service& topology::service() {
  return *impl_->service;
}

const model::model_config& topology::config() const {
  return impl_->ctx->config;
}

status topology::kill(const std::string& actor_name) {
  return impl_->service->kill_actor(actor_name);
}

status topology::replan_randomly(uint64_t seed, double move_fraction, const std::string& kill) {
  return impl_->service->replan(seed, move_fraction, kill);
}

std::string topology::experts_json() const {
  return impl_->service->experts_json();
}

std::string topology::events_json(uint64_t since) const {
  return impl_->service->events_json(since);
}

std::string topology::actors_json() const {
  return impl_->service->actors_json();
}

std::string topology::statuses_json() const {
  return impl_->service->status_json();
}

}  // namespace brigade::deploy
