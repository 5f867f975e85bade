#include "actors/supervisor.hpp"

#include <caf/all.hpp>

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "actors/decode_worker.hpp"
#include "actors/expert_shard.hpp"
#include "actors/prefill_worker.hpp"
#include "common/log.hpp"

namespace brigade::actors {
namespace {

using clock_type = std::chrono::steady_clock;

struct child {
  std::string name;
  std::string role;
  int index = 0;
  caf::actor handle;
  bool alive = false;
  bool given_up = false;
  std::deque<clock_type::time_point> recent_restarts;
};

struct supervisor_state {
  std::shared_ptr<const model_context> ctx;
  supervisor_config config;
  registry_actor registry;
  router_actor router;
  std::map<std::string, child> children;
  shard_set shards;
  bool shutting_down = false;
  int64_t restarts = 0;
  static inline const char* name = "supervisor";
};

using supervisor_pointer = supervisor_actor::stateful_pointer<supervisor_state>;

int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::vector<slot_assignment> slots_of_shard(const expert_layout& layout, int shard) {
  std::vector<slot_assignment> out;
  for (size_t l = 0; l < layout.phy2log.size(); ++l) {
    for (size_t slot = 0; slot < layout.phy2log[l].size(); ++slot) {
      if (layout.shard_of(static_cast<int>(slot)) != shard) continue;
      out.push_back({static_cast<int32_t>(l), static_cast<int32_t>(slot), layout.phy2log[l][slot]});
    }
  }
  return out;
}

// Spawns (or re-spawns) one child and tells whoever needs its new handle.
void spawn_child(supervisor_pointer self, child& c) {
  auto& st = self->state;
  const deploy::manifest& m = st.config.manifest;
  if (c.role == "expert_shard") {
    expert_shard_config cfg{c.name, slots_of_shard(*st.shards.layout, c.index)};
    auto h = spawn_expert_shard(self->system(), st.ctx, std::move(cfg));
    c.handle = caf::actor_cast<caf::actor>(h);
    st.shards.shards[static_cast<size_t>(c.index)] = h;
    // Workers resend any layer stalled on the old shard.
    for (auto& [name, other] : st.children) {
      if (other.alive && other.role == "decode") {
        self->send(caf::actor_cast<decode_worker_actor>(other.handle), shards_atom_v, st.shards);
      } else if (other.alive && other.role == "prefill") {
        self->send(caf::actor_cast<prefill_worker_actor>(other.handle), shards_atom_v, st.shards);
      }
    }
  } else if (c.role == "decode") {
    decode_worker_config cfg;
    cfg.name = c.name;
    cfg.max_running = m.decode.max_running;
    cfg.kv_tokens = m.decode.kv_tokens;
    cfg.block_tokens = m.block_tokens;
    c.handle = caf::actor_cast<caf::actor>(spawn_decode_worker(self->system(), st.ctx, cfg, st.shards));
    self->send(st.router, worker_atom_v,
               worker_up{"decode", c.index, c.name, c.handle, m.decode.max_running});
  } else {
    prefill_worker_config cfg;
    cfg.name = c.name;
    cfg.max_step_tokens = m.prefill.max_step_tokens;
    cfg.kv_tokens = m.prefill.kv_tokens;
    cfg.block_tokens = m.block_tokens;
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

void on_child_down(supervisor_pointer self, const caf::down_msg& dm) {
  auto& st = self->state;
  for (auto& [name, c] : st.children) {
    if (!c.alive || c.handle.address() != dm.source) continue;
    c.alive = false;
    if (st.shutting_down) return;
    const auto& policy = st.config.manifest.restart;
    const auto now = clock_type::now();
    const auto window = std::chrono::duration_cast<clock_type::duration>(
        std::chrono::duration<double>(policy.window_s));
    while (!c.recent_restarts.empty() && now - c.recent_restarts.front() > window) {
      c.recent_restarts.pop_front();
    }
    const bool give_up = static_cast<int>(c.recent_restarts.size()) >= policy.max_restarts;
    const std::string cause = to_string(dm.reason);
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
    c.recent_restarts.push_back(now);
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
      child c;
      c.role = role;
      c.index = i;
      c.name = role + "-" + std::to_string(i);
      st.children[c.name] = c;
    }
  };
  add("expert_shard", m.experts.count);
  add("decode", m.decode.count);
  add("prefill", m.prefill.count);
  st.shards.shards.resize(static_cast<size_t>(m.experts.count));
  // Shards first: workers are spawned with the complete shard set.
  for (const char* role : {"expert_shard", "decode", "prefill"}) {
    for (auto& [name, c] : st.children) {
      if (c.role == role) spawn_child(self, c);
    }
  }
}

}  // namespace

static supervisor_actor::behavior_type supervisor_behavior(
    supervisor_pointer self, std::shared_ptr<const model_context> ctx, supervisor_config config,
    registry_actor registry, router_actor router) {
  auto& st = self->state;
  st.ctx = std::move(ctx);
  st.config = std::move(config);
  st.registry = std::move(registry);
  st.router = std::move(router);
  st.shards.layout = std::make_shared<const expert_layout>(st.config.layout);
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
      [=](status_atom) {
        const auto& s = self->state;
        role_status out;
        out.name = "supervisor";
        out.role = "supervisor";
        out.steps = s.restarts;
        out.detail = nlohmann::json{{"children", s.children.size()}, {"restarts", s.restarts}}.dump();
        return out;
      },
      [=](status_atom, bool) -> caf::result<std::vector<role_status>> {
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
      },
  };
}

supervisor_actor spawn_supervisor(caf::actor_system& sys, std::shared_ptr<const model_context> ctx,
                                  supervisor_config config, registry_actor registry,
                                  router_actor router) {
  return sys.spawn(supervisor_behavior, std::move(ctx), std::move(config), std::move(registry),
                   std::move(router));
}

}  // namespace brigade::actors
