#include "deploy/supervisor.hpp"

#include <caf/all.hpp>

#include <chrono>
#include <nlohmann/json.hpp>

#include "actors/role_spawner.hpp"
#include "actors/sender_check.hpp"
#include "common/log.hpp"
#include "common/wall_clock.hpp"
#include "config/role_placement.hpp"
#include "deploy/group_placement_check.hpp"
#include "deploy/supervisor_state.hpp"
#include "model/kv_layout.hpp"

namespace brigade::deploy {
namespace {

expert_shard_config shard_config(supervisor_pointer self, const supervised_child& c) {
  auto& st = self->state;
  expert_shard_config cfg;
  cfg.name = c.name;
  cfg.index = c.index;
  // A shard always starts from the last complete layout; a migration in flight was rolled back.
  cfg.plan = plan_for_shard(st.balance->current(), st.ctx->config.moe_layers(), c.index);
  cfg.sample_interval_steps = st.config.manifest.eplb.sample_interval_steps;
  cfg.first_window = st.balance->next_window();
  cfg.copy_interval_ms = st.config.manifest.eplb.copy_interval_ms;
  cfg.load_sink = caf::actor_cast<load_sink_actor>(self);
  return cfg;
}

decode_worker_config decode_config(supervisor_pointer self, const supervised_child& c) {
  const config::manifest& m = self->state.config.manifest;
  decode_worker_config cfg;
  cfg.name = c.name;
  cfg.max_running = m.decode.max_running;
  cfg.kv_tokens = m.decode.kv_tokens;
  cfg.block_tokens = m.block_tokens;
  cfg.kv_dtype = model::kv_dtype_name(m.kv_dtype);
  cfg.speculation = m.decode.speculation;
  cfg.layout_acks = caf::actor_cast<layout_ack_actor>(self);
  cfg.reports = self->state.router;
  return cfg;
}

prefill_worker_config prefill_config(supervisor_pointer self, const supervised_child& c) {
  const config::manifest& m = self->state.config.manifest;
  prefill_worker_config cfg;
  cfg.name = c.name;
  cfg.max_step_tokens = m.prefill.max_step_tokens;
  cfg.kv_tokens = m.prefill.kv_tokens;
  cfg.block_tokens = m.block_tokens;
  cfg.kv_dtype = model::kv_dtype_name(m.kv_dtype);
  cfg.layout_acks = caf::actor_cast<layout_ack_actor>(self);
  configure_prefill_cache(self, cfg, c);
  return cfg;
}

// What spawning `c` takes, here or on its node: the one place a role's kind chooses its config.
role_spec spec_for(supervisor_pointer self, const supervised_child& c) {
  role_spec spec;
  // The device of the node it runs on now, which may not be its home after a node was lost.
  spec.device = config::device_for(self->state.config.manifest, c.role, c.node).to_string();
  switch (c.role) {
    case role_kind::expert_shard:
      spec.config = shard_config(self, c);
      break;
    case role_kind::kv_store:
      spec.config = kv_store_config_for(self, c);
      break;
    case role_kind::prefill:
      spec.config = prefill_config(self, c);
      spec.shards = self->state.shards;
      break;
    case role_kind::decode:
      spec.config = decode_config(self, c);
      spec.shards = self->state.shards;
      break;
  }
  return spec;
}

void spawn_workers(supervisor_pointer self);
void spawn_failed(supervisor_pointer self, const std::string& name, const std::string& why,
                  bool refused = false);

// The node answered and said no (its checks or its model): not a sign that it is down.
bool refused_by_node(const caf::error& err) {
  return err.category() == caf::atom("system") &&
         (err.code() == static_cast<uint8_t>(caf::sec::invalid_argument) ||
          err.code() == static_cast<uint8_t>(caf::sec::runtime_error));
}

}  // namespace

// A child is up (spawned here or on a node, or adopted back): monitor it and tell whoever needs
// its handle.
void child_up(supervisor_pointer self, const std::string& name, caf::actor handle, bool adopted,
              uint64_t attempt) {
  auto& st = self->state;
  auto it = st.children.find(name);
  // A spawn given up on (its node was lost meanwhile) answering late: that instance is extra.
  const bool stale = it != st.children.end() && attempt != 0 && attempt != it->second.attempt;
  if (it == st.children.end() || st.shutting_down || stale) {
    if (handle) self->send_exit(handle, caf::exit_reason::user_shutdown);
    return;
  }
  if (!handle) return spawn_failed(self, name, "the node answered with no actor");
  supervised_child& c = it->second;
  const bool again = c.handle != nullptr;
  c.handle = std::move(handle);
  c.alive = true;
  c.spawning = false;
  c.awaiting_node = false;
  self->monitor(c.handle);
  switch (c.role) {
    case role_kind::expert_shard:
      st.shards.shards[static_cast<size_t>(c.index)] =
          caf::actor_cast<expert_shard_actor>(c.handle);
      if (!st.workers_started) {
        spawn_workers(self);
      } else {
        log::info("supervisor",
                  c.name + " is up again on " + c.node + ": workers get the new shard set");
        broadcast_shards(self);  // workers resend any layer stalled on the old shard
      }
      break;
    case role_kind::kv_store:
      announce_kv_store(self, c);
      break;
    case role_kind::prefill:
    case role_kind::decode:
      // The set it was spawned with may have changed while the spawn was under way (a shard on
      // a lost node replaced meanwhile): broadcasts went only to workers already up.
      self->send(caf::actor_cast<shard_user_actor>(c.handle), shards_atom_v, st.shards);
      if (c.role == role_kind::prefill) {
        self->send(
            st.router, worker_atom_v,
            prefill_up{c.index, c.name, caf::actor_cast<prefill_worker_actor>(c.handle), c.node});
      } else {
        self->send(st.router, worker_atom_v,
                   decode_up{c.index, c.name, caf::actor_cast<decode_worker_actor>(c.handle),
                             st.config.manifest.decode.max_running, c.node});
      }
      break;
  }
  if (adopted) {
    caf::anon_send(st.registry, adopt_atom_v, c.name, c.node);
    cluster_event(self, "role_adopted", c.node, c.name, "kept its state across the lost contact");
    return;
  }
  actor_entry entry;
  entry.name = c.name;
  entry.role = to_string(c.role);
  entry.node = c.node;
  entry.spawned_ms = unix_ms();
  caf::anon_send(st.registry, register_atom_v, entry);
  if (again) cluster_event(self, "role_restarted", c.node, c.name, "");
}

namespace {

// Workers are spawned once every shard is up, so that they start with a complete shard set.
void spawn_workers(supervisor_pointer self) {
  auto& st = self->state;
  for (const auto& shard : st.shards.shards) {
    if (!shard) return;
  }
  st.workers_started = true;
  for (role_kind role : {role_kind::decode, role_kind::prefill}) {
    for (auto& [name, c] : st.children) {
      if (c.role == role && !c.alive && !c.spawning) spawn_child(self, c);
    }
  }
}

}  // namespace

void spawn_child(supervisor_pointer self, supervised_child& c) {
  auto& st = self->state;
  if (c.node != "local" && st.nodes[c.node].lost) {
    if (st.nodes[c.node].window_open) {
      c.awaiting_node = true;  // its node may answer yet: then it is adopted back
      return;
    }
    const std::string other = replacement_node(st);
    if (other.empty()) {
      // Nowhere to run: it waits for any node to come back (on_node_back spawns it there).
      log::warn("supervisor", c.name + " waits for a node: every node is out of contact");
      c.awaiting_node = true;
      return;
    }
    c.node = other;
  }
  c.awaiting_node = false;
  c.spawning = true;
  const uint64_t attempt = ++c.attempt;
  const std::string name = c.name;
  if (c.node == "local") {
    auto h = spawn_role(self->system(), st.ctx, spec_for(self, c), "local");
    if (!h) return spawn_failed(self, name, h.err().message, true);
    return child_up(self, name, std::move(h.value()), false, attempt);
  }
  const node_agent_actor agent = st.config.agents.at(c.node);
  self->request(agent, std::chrono::seconds(120), spawn_atom_v, st.config.manifest.model,
                spec_for(self, c))
      .then([self, name,
             attempt](caf::actor& h) { child_up(self, name, std::move(h), false, attempt); },
            [self, name, attempt](caf::error& err) {
              auto it = self->state.children.find(name);
              if (it == self->state.children.end() || it->second.attempt != attempt) return;
              spawn_failed(self, name, self->system().render(err), refused_by_node(err));
            });
}

namespace {

// Restart intensity: true when the child may restart again within the policy's window.
bool may_restart(const config::restart_policy& policy, supervised_child& c) {
  const auto now = supervisor_clock::now();
  const auto window = std::chrono::duration_cast<supervisor_clock::duration>(
      std::chrono::duration<double>(policy.window_s));
  while (!c.recent_restarts.empty() && now - c.recent_restarts.front() > window) {
    c.recent_restarts.pop_front();
  }
  return static_cast<int>(c.recent_restarts.size()) < policy.max_restarts;
}

// The restart policy after `what` happened to `c` (it died, or its spawn was refused): the next
// try after the back-off, or giving up once the window holds max_restarts. True when it gave up.
bool restart_or_give_up(supervisor_pointer self, supervised_child& c, const std::string& what) {
  const auto& policy = self->state.config.manifest.restart;
  if (!may_restart(policy, c)) {
    c.given_up = true;
    log::error("supervisor", c.name + " " + what + " and exceeded " +
                                 std::to_string(policy.max_restarts) + " restarts in " +
                                 std::to_string(policy.window_s) + " s: giving up");
    return true;
  }
  const int backoff_ms = policy.delay_ms(c.recent_restarts.size());
  c.recent_restarts.push_back(supervisor_clock::now());
  log::warn("supervisor",
            c.name + " " + what + "; restarting in " + std::to_string(backoff_ms) + " ms");
  self->delayed_send(self, std::chrono::milliseconds(backoff_ms), restart_atom_v, c.name);
  return false;
}

bool is_alive(const supervisor_state& st, const std::string& name) {
  auto it = st.children.find(name);
  return it != st.children.end() && it->second.alive;
}

// Fault injection: the named child goes down as if it crashed, and is restarted by the policy.
bool kill_child(supervisor_pointer self, const std::string& name) {
  auto& st = self->state;
  if (!is_alive(st, name)) return false;
  log::warn("supervisor", "fault injection: killing " + name);
  self->send_exit(st.children.at(name).handle, caf::exit_reason::kill);
  return true;
}

void on_child_down(supervisor_pointer self, const caf::down_msg& dm) {
  auto& st = self->state;
  for (auto& [name, c] : st.children) {
    if (!c.alive || c.handle.address() != dm.source) continue;
    c.alive = false;
    if (st.shutting_down) return;
    if (c.role == role_kind::expert_shard && st.moving) roll_back(self, c.name + " died");
    if (c.moving_home) {
      c.moving_home = false;
      c.node = c.home;
      caf::anon_send(st.registry, death_atom_v, c.name, "moved back to node " + c.home, false);
      cluster_event(self, "role_moved_home", c.home, c.name, "");
      return spawn_child(self, c);
    }
    // A closed connection says nothing about the role: its node may answer again. A role
    // stopped by its node leaving moves on at once.
    if (c.node != "local" &&
        (dm.reason == caf::exit_reason::remote_link_unreachable || st.nodes[c.node].lost)) {
      return child_unreachable(self, c, to_string(dm.reason));
    }
    const std::string cause = to_string(dm.reason);
    const bool gave_up = restart_or_give_up(self, c, "died (" + cause + ")");
    caf::anon_send(st.registry, death_atom_v, c.name, cause, gave_up);
    cluster_event(self, gave_up ? "role_gave_up" : "role_died", c.node, c.name, cause);
    return;
  }
}

// A spawn that did not happen. A node that answered with a refusal (a bad model directory, a
// spawn check) is alive and will refuse again: the retries count against the restart policy and
// end in giving up, as for a role that keeps crashing. No answer at all marks the node dead, and
// the role moves to another node.
void spawn_failed(supervisor_pointer self, const std::string& name, const std::string& why,
                  bool refused) {
  auto& st = self->state;
  auto it = st.children.find(name);
  if (it == st.children.end() || st.shutting_down) return;
  supervised_child& c = it->second;
  c.spawning = false;
  const std::string where = c.node.empty() ? "any node" : c.node;
  if (!refused) {
    // No answer: the node may be going down. Its membership decides that; the retry looks at
    // the node's state again.
    log::error("supervisor", "cannot spawn " + name + " on " + where + ": " + why + "; retrying");
    self->delayed_send(self, std::chrono::milliseconds(st.config.manifest.restart.backoff_ms + 100),
                       restart_atom_v, name);
    return;
  }
  const std::string cause = "cannot spawn on " + where + ": " + why;
  if (restart_or_give_up(self, c, cause)) {
    caf::anon_send(st.registry, death_atom_v, c.name, cause, true);
  }
}

void add_children(supervisor_pointer self) {
  auto& st = self->state;
  const auto placement =
      st.config.placement.empty() ? config::place(st.config.manifest) : st.config.placement;
  for (const auto& p : placement) {
    supervised_child c;
    c.role = p.role;
    c.index = p.index;
    c.name = p.name;
    c.node = p.node;
    c.home = p.node;
    st.children[c.name] = c;
  }
  if (st.config.manifest.kv_cache.has_store()) {
    // A KV store on every node that runs prefill workers: their host and SSD tiers, next to
    // them, so that block bytes never cross nodes. "kv_store-0" in a single process.
    std::set<std::string> nodes;
    for (const auto& [name, c] : st.children) {
      if (c.role == role_kind::prefill) nodes.insert(c.node);
    }
    for (const auto& node : nodes) {
      supervised_child store;
      store.role = role_kind::kv_store;
      store.name = node == "local" ? "kv_store-0" : "kv_store-" + node;
      store.node = node;
      store.home = node;
      st.children[store.name] = store;
    }
  }
  st.shards.shards.resize(static_cast<size_t>(st.config.manifest.experts.count));
  // KV stores and shards first: workers are spawned once all shards are up (spawn_workers).
  for (role_kind role : {role_kind::kv_store, role_kind::expert_shard}) {
    for (auto& [name, c] : st.children) {
      if (c.role == role) spawn_child(self, c);
    }
  }
}

// Asks every live child for its status; answers with what came back within the bound.
caf::result<role_statuses> collect_statuses(supervisor_pointer self) {
  auto rp = self->make_response_promise<role_statuses>();
  auto collected = std::make_shared<role_statuses>();
  auto pending = std::make_shared<int>(1);  // released below, once every request is out
  auto done = [rp, collected, pending]() mutable {
    if (--*pending == 0) rp.deliver(*collected);
  };
  auto ask = [&](auto handle, auto into) {
    ++*pending;
    self->request(handle, std::chrono::seconds(5), status_atom_v)
        .then(
            [collected, into, done](decltype(into(*collected).front()) status) mutable {
              into(*collected).push_back(std::move(status));
              done();
            },
            [done](caf::error&) mutable { done(); });
  };
  for (auto& [name, c] : self->state.children) {
    if (!c.alive) continue;
    switch (c.role) {
      case role_kind::expert_shard:
        ask(
            caf::actor_cast<expert_shard_actor>(c.handle),
            [](role_statuses & r) -> auto& { return r.expert_shards; });
        break;
      case role_kind::kv_store:
        ask(
            caf::actor_cast<kv_store_actor>(c.handle),
            [](role_statuses & r) -> auto& { return r.kv_stores; });
        break;
      case role_kind::prefill:
        ask(
            caf::actor_cast<prefill_worker_actor>(c.handle),
            [](role_statuses & r) -> auto& { return r.prefill; });
        break;
      case role_kind::decode:
        ask(
            caf::actor_cast<decode_worker_actor>(c.handle),
            [](role_statuses & r) -> auto& { return r.decode; });
        break;
    }
  }
  done();
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
    if (!e.node.empty()) out.back()["node"] = e.node;
    if (!e.actor.empty()) out.back()["actor"] = e.actor;
  }
  // A detail may quote a peer's error text: bytes that are not UTF-8 are replaced, not thrown on.
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

void cluster_event(supervisor_pointer self, const std::string& kind, const std::string& node,
                   const std::string& actor, const std::string& detail) {
  rebalance_event ev;
  ev.kind = kind;
  ev.node = node;
  ev.actor = actor;
  ev.detail = detail;
  ev.epoch = self->state.balance->current().epoch();
  self->state.balance->add_event(std::move(ev));
}

void broadcast_shards(supervisor_pointer self) {
  auto& st = self->state;
  ++st.shards.version;
  for (auto& [name, other] : st.children) {
    if (other.alive && is_worker(other.role)) {
      self->send(caf::actor_cast<shard_user_actor>(other.handle), shards_atom_v, st.shards);
    }
  }
}

static supervisor_impl::behavior_type supervisor_behavior(supervisor_pointer self,
                                                          std::shared_ptr<const model_context> ctx,
                                                          supervisor_config config,
                                                          registry_actor registry,
                                                          router_actor router) {
  auto& st = self->state;
  st.ctx = std::move(ctx);
  st.config = std::move(config);
  st.registry = std::move(registry);
  st.router = std::move(router);
  const auto& e = st.config.manifest.eplb;
  rebalance_options balance{e.sample_interval_steps,
                            e.replan_interval_steps,
                            e.margin,
                            64,
                            e.copy_interval_ms,
                            e.move_budget,
                            e.cross_node_copy_cost,
                            e.early_replan_above};
  // Shards are numbered in node order, so the nodes hosting shards are the planner's nodes.
  balance.groups_per_node = e.placement == config::group_placement::node;
  balance.nodes = expert_shard_nodes(st.config.manifest);
  st.balance = std::make_unique<rebalancer>(st.ctx->config, st.config.layout, balance);
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
        // Fault injection is the local admin API's, never another node's.
        return sent_locally(self->current_sender(), self->node()) && kill_child(self, name);
      },
      [=](restart_atom, const std::string& name) {
        auto& s = self->state;
        if (!sent_by(self->current_sender(), self)) return;  // its own backoff timer only
        auto it = s.children.find(name);
        if (s.shutting_down || it == s.children.end() || it->second.alive || it->second.spawning) {
          return;
        }
        ++s.restarts;
        spawn_child(self, it->second);
      },
      [=](load_sample& sample) { on_load_sample(self, sample); },
      [=](switched_atom, const std::string& worker, uint64_t epoch) {
        on_switched(self, worker, epoch);
      },
      [=](replan_atom, uint64_t seed, double move_fraction, const std::string& kill) {
        auto& s = self->state;
        if (!sent_locally(self->current_sender(), self->node())) {
          return static_cast<int32_t>(replan_outcome::busy);
        }
        if (!kill.empty() && !is_alive(s, kill)) {
          return static_cast<int32_t>(replan_outcome::no_such_actor);
        }
        if (!may_start_migration(s)) return static_cast<int32_t>(replan_outcome::busy);
        // The exit goes out before the prepare: a shard killed so never prepares, and the
        // migration must roll back however the threads run.
        if (!kill.empty()) kill_child(self, kill);
        start_migration(self, s.balance->random_layout(seed, move_fraction));
        return static_cast<int32_t>(replan_outcome::started);
      },
      [=](experts_atom) { return self->state.balance->to_json(migration_of(self->state)); },
      [=](events_atom, uint64_t since) { return events_since(self->state, since); },
      [=](status_atom) {
        const auto& s = self->state;
        supervisor_status out;
        out.load.name = "supervisor";
        out.load.role = "supervisor";
        out.load.in_flight = s.moving ? 1 : 0;
        out.load.steps = s.restarts;
        out.children = static_cast<int64_t>(s.children.size());
        out.restarts = s.restarts;
        out.balancedness = s.balance->last_balancedness();
        out.rebalances_adopted = s.balance->adopted();
        out.rebalances_rolled_back = s.balance->rolled_back_count();
        out.rebalances_rejected = s.balance->rejected();
        out.migration_durations_s = s.balance->migration_durations();
        out.layout_epoch = s.balance->current().epoch();
        return out;
      },
      [=](status_atom, bool) { return collect_statuses(self); },
      [=](node_lost_atom, const std::string& node, const std::string& why, bool gone) {
        if (sent_locally(self->current_sender(), self->node())) {
          on_node_lost(self, node, why, gone);
        }
      },
      [=](node_back_atom, const std::string& node, node_agent_actor& agent,
          std::vector<held_role>& held) {
        if (!sent_locally(self->current_sender(), self->node())) return;
        on_node_back(self, node, std::move(agent), std::move(held));
      },
      [=](suspect_atom, const std::string& node, bool suspected) {
        if (sent_locally(self->current_sender(), self->node())) on_suspect(self, node, suspected);
      },
      [=](leave_atom, const std::string& node) {
        auto& s = self->state;
        auto agent = s.config.agents.find(node);
        if (agent == s.config.agents.end() || !sent_by(self->current_sender(), agent->second)) {
          return;
        }
        on_node_leaving(self, node);
      },
      [=](rejoin_atom, const std::string& node, uint64_t loss) {
        if (sent_by(self->current_sender(), self)) on_rejoin_window_over(self, node, loss);
      },
  };
}

supervisor_actor spawn_supervisor(caf::actor_system& sys, std::shared_ptr<const model_context> ctx,
                                  supervisor_config config, registry_actor registry,
                                  router_actor router) {
  return sys.spawn(supervisor_behavior, std::move(ctx), std::move(config), std::move(registry),
                   std::move(router));
}

void register_supervisor_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<supervisor_status>("brigade::supervisor_status");
  cfg.add_message_type<role_statuses>("brigade::role_statuses");
  cfg.add_message_type<supervisor_actor>("brigade::supervisor_actor");
}

}  // namespace brigade::deploy
