#include "actors/supervisor.hpp"

#include <caf/all.hpp>

#include <chrono>
#include <nlohmann/json.hpp>

#include "actors/decode_worker.hpp"
#include "actors/expert_shard.hpp"
#include "actors/prefill_worker.hpp"
#include "actors/supervisor_state.hpp"
#include "common/log.hpp"

namespace brigade::actors {
namespace {

int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Spawns (or re-spawns) one child and tells whoever needs its new handle.
void spawn_child(supervisor_pointer self, supervised_child& c) {
  auto& st = self->state;
  const deploy::manifest& m = st.config.manifest;
  const auto acks = caf::actor_cast<layout_ack_actor>(self);
  if (c.role == "expert_shard") {
    expert_shard_config cfg;
    cfg.name = c.name;
    cfg.index = c.index;
    // A shard always starts from the last complete layout; a migration in flight was rolled back.
    cfg.plan = plan_for_shard(st.balance->current(), c.index);
    cfg.sample_interval_steps = m.eplb.sample_interval_steps;
    cfg.load_sink = caf::actor_cast<load_sink_actor>(self);
    auto h = spawn_expert_shard(self->system(), st.ctx, std::move(cfg));
    c.handle = caf::actor_cast<caf::actor>(h);
    st.shards.shards[static_cast<size_t>(c.index)] = h;
    broadcast_shards(self);  // workers resend any layer stalled on the old shard
  } else if (c.role == "decode") {
    decode_worker_config cfg;
    cfg.name = c.name;
    cfg.max_running = m.decode.max_running;
    cfg.kv_tokens = m.decode.kv_tokens;
    cfg.block_tokens = m.block_tokens;
    cfg.layout_acks = acks;
    cfg.router = st.router;
    c.handle = caf::actor_cast<caf::actor>(spawn_decode_worker(self->system(), st.ctx, cfg, st.shards));
    self->send(st.router, worker_atom_v,
               worker_up{"decode", c.index, c.name, c.handle, m.decode.max_running});
  } else if (c.role == "kv_store") {
    spawn_kv_store_child(self, c);
  } else {
    prefill_worker_config cfg;
    cfg.name = c.name;
    cfg.max_step_tokens = m.prefill.max_step_tokens;
    cfg.kv_tokens = m.prefill.kv_tokens;
    cfg.block_tokens = m.block_tokens;
    cfg.layout_acks = acks;
    configure_prefill_cache(self, cfg, c.index);
    c.handle = caf::actor_cast<caf::actor>(spawn_prefill_worker(self->system(), st.ctx, cfg, st.shards));
    self->send(st.router, worker_atom_v, worker_up{"prefill", c.index, c.name, c.handle, 0});
  }
  c.alive = true;
  self->monitor(c.handle);
  actor_entry entry;
  entry.name = c.name;
  entry.role = c.role;
  entry.node = "local";
  entry.spawned_ms = unix_ms();
  caf::anon_send(st.registry, register_atom_v, entry);
}

// Restart intensity: true when the child may restart again within the policy's window.
bool may_restart(const deploy::restart_policy& policy, supervised_child& c) {
  const auto now = supervisor_clock::now();
  const auto window = std::chrono::duration_cast<supervisor_clock::duration>(
      std::chrono::duration<double>(policy.window_s));
  while (!c.recent_restarts.empty() && now - c.recent_restarts.front() > window) {
    c.recent_restarts.pop_front();
  }
  return static_cast<int>(c.recent_restarts.size()) < policy.max_restarts;
}

void on_child_down(supervisor_pointer self, const caf::down_msg& dm) {
  auto& st = self->state;
  for (auto& [name, c] : st.children) {
    if (!c.alive || c.handle.address() != dm.source) continue;
    c.alive = false;
    if (st.shutting_down) return;
    const std::string cause = to_string(dm.reason);
    if (c.role == "expert_shard" && st.moving) roll_back(self, c.name + " died");
    const auto& policy = st.config.manifest.restart;
    const bool give_up = !may_restart(policy, c);
    caf::anon_send(st.registry, death_atom_v, c.name, cause, give_up);
    if (give_up) {
      c.given_up = true;
      log::error("supervisor", c.name + " died (" + cause + ") and exceeded " +
                                   std::to_string(policy.max_restarts) + " restarts in " +
                                   std::to_string(policy.window_s) + " s: giving up");
      return;
    }
    const int shift = std::min<int>(static_cast<int>(c.recent_restarts.size()), 20);
    const int backoff_ms = std::min(policy.max_backoff_ms, policy.backoff_ms << shift);
    c.recent_restarts.push_back(supervisor_clock::now());
    log::warn("supervisor", c.name + " died (" + cause + "); restarting in " +
                                std::to_string(backoff_ms) + " ms");
    self->delayed_send(self, std::chrono::milliseconds(backoff_ms), restart_atom_v, c.name);
    return;
  }
}

void add_children(supervisor_pointer self) {
  auto& st = self->state;
  const deploy::manifest& m = st.config.manifest;
  auto add = [&](const std::string& role, int count) {
    for (int i = 0; i < count; ++i) {
      supervised_child c;
      c.role = role;
      c.index = i;
      c.name = role + "-" + std::to_string(i);
      st.children[c.name] = c;
    }
  };
  add("expert_shard", m.experts.count);
  add("kv_store", m.kv_cache.has_store() ? 1 : 0);
  add("decode", m.decode.count);
  add("prefill", m.prefill.count);
  st.shards.shards.resize(static_cast<size_t>(m.experts.count));
  // Shards first: workers are spawned with the complete shard set.
  for (const char* role : {"expert_shard", "kv_store", "decode", "prefill"}) {
    for (auto& [name, c] : st.children) {
      if (c.role == role) spawn_child(self, c);
    }
  }
}

caf::result<std::vector<role_status>> collect_statuses(supervisor_pointer self) {
  auto& s = self->state;
  auto rp = self->make_response_promise<std::vector<role_status>>();
  auto collected = std::make_shared<std::vector<role_status>>();
  auto pending = std::make_shared<int>(0);
  for (auto& [name, c] : s.children) {
    if (!c.alive) continue;
    ++*pending;
    self->request(c.handle, std::chrono::seconds(5), status_atom_v)
        .then(
            [=](role_status& rs) mutable {
              collected->push_back(std::move(rs));
              if (--*pending == 0) rp.deliver(*collected);
            },
            [=](caf::error&) mutable {
              if (--*pending == 0) rp.deliver(*collected);
            });
  }
  if (*pending == 0) rp.deliver(*collected);
  return rp;
}

std::string events_since(const supervisor_state& st, uint64_t since) {
  const auto& events = st.balance->events();
  const uint64_t first = st.balance->events_total() - events.size();
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < events.size(); ++i) {
    const uint64_t seq = first + i + 1;
    if (seq <= since) continue;
    const auto& e = events[i];
    out.push_back({{"seq", seq},
                   {"unix_ms", e.unix_ms},
                   {"kind", e.kind},
                   {"epoch", e.epoch},
                   {"predicted_balancedness", e.predicted_balancedness},
                   {"measured_balancedness", e.measured_balancedness},
                   {"moved_slots", e.moved_slots},
                   {"duration_s", e.duration_s},
                   {"detail", e.detail}});
  }
  return out.dump();
}

}  // namespace

void broadcast_shards(supervisor_pointer self) {
  auto& st = self->state;
  for (auto& [name, other] : st.children) {
    if (other.alive && other.role == "decode") {
      self->send(caf::actor_cast<decode_worker_actor>(other.handle), shards_atom_v, st.shards);
    } else if (other.alive && other.role == "prefill") {
      self->send(caf::actor_cast<prefill_worker_actor>(other.handle), shards_atom_v, st.shards);
    }
  }
}

static supervisor_actor::behavior_type supervisor_behavior(
    supervisor_pointer self, std::shared_ptr<const model_context> ctx, supervisor_config config,
    registry_actor registry, router_actor router) {
  auto& st = self->state;
  st.ctx = std::move(ctx);
  st.config = std::move(config);
  st.registry = std::move(registry);
  st.router = std::move(router);
  const auto& e = st.config.manifest.eplb;
  st.balance = std::make_unique<rebalancer>(
      st.ctx->config, st.config.layout,
      rebalance_options{e.sample_interval_steps, e.replan_interval_steps, e.margin, 64});
  st.shards.layout = st.config.layout;
  self->set_down_handler([self](caf::down_msg& dm) { on_child_down(self, dm); });
  self->set_exit_handler([self](caf::exit_msg& msg) {
    // Shutting down: stop restarting, take every child down, then go.
    auto& s = self->state;
    s.shutting_down = true;
    for (auto& [name, c] : s.children) {
      if (c.alive) self->send_exit(c.handle, msg.reason);
    }
    self->quit(msg.reason);
  });
  add_children(self);
  return {
      [=](kill_atom, const std::string& name) {
        auto& s = self->state;
        auto it = s.children.find(name);
        if (it == s.children.end() || !it->second.alive) return false;
        log::warn("supervisor", "fault injection: killing " + name);
        self->send_exit(it->second.handle, caf::exit_reason::kill);
        return true;
      },
      [=](restart_atom, const std::string& name) {
        auto& s = self->state;
        auto it = s.children.find(name);
        if (s.shutting_down || it == s.children.end() || it->second.alive) return;
        ++s.restarts;
        spawn_child(self, it->second);
      },
      [=](load_sample& sample) { on_load_sample(self, sample); },
      [=](switched_atom, const std::string& worker, uint64_t epoch) {
        on_switched(self, worker, epoch);
      },
      [=](replan_atom, uint64_t seed) {
        return start_migration(self, self->state.balance->random_layout(seed));
      },
      [=](experts_atom) { return self->state.balance->to_json(migration_json(self->state)); },
      [=](events_atom, uint64_t since) { return events_since(self->state, since); },
      [=](status_atom) {
        const auto& s = self->state;
        role_status out;
        out.name = "supervisor";
        out.role = "supervisor";
        out.in_flight = s.moving ? 1 : 0;
        out.steps = s.restarts;
        out.detail = nlohmann::json{{"children", s.children.size()},
                                    {"restarts", s.restarts},
                                    {"balancedness", s.balance->last_balancedness()},
                                    {"rebalances_adopted", s.balance->adopted()},
                                    {"rebalances_rolled_back", s.balance->rolled_back_count()},
                                    {"rebalances_rejected", s.balance->rejected()},
                                    {"migration_durations_s", s.balance->migration_durations()},
                                    {"layout_epoch", s.balance->current().epoch}}
                         .dump();
        return out;
      },
      [=](status_atom, bool) { return collect_statuses(self); },
  };
}

supervisor_actor spawn_supervisor(caf::actor_system& sys, std::shared_ptr<const model_context> ctx,
                                  supervisor_config config, registry_actor registry,
                                  router_actor router) {
  return sys.spawn(supervisor_behavior, std::move(ctx), std::move(config), std::move(registry),
                   std::move(router));
}

}  // namespace brigade::actors
