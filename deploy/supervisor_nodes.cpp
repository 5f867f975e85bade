// The supervisor's half that follows nodes in and out of contact (the coordinator's membership
// reports them): a lost node's roles wait for it through the rejoin window, are adopted back when
// it answers in time, and are spawned elsewhere when it does not; roles that moved go home when
// their node is back; a suspected node gets no new roles.
//
//   alive --connection closed--> lost, window open --answers--> back: adopt what it still holds
//                                     |                                 (consistent roles only),
//                                     | window over                     spawn what it lost,
//                                     v                                 bring roles home
//                                lost: roles spawned elsewhere --answers--> back (as above)
#include <caf/all.hpp>

#include "common/log.hpp"
#include "deploy/supervisor_state.hpp"

namespace brigade::deploy {
namespace {

// Opens the node's rejoin window, once per loss.
void node_unreachable(supervisor_pointer self, const std::string& node, const std::string& why) {
  auto& st = self->state;
  node_view& v = st.nodes[node];
  if (v.lost) return;
  v.lost = true;
  v.window_open = true;
  ++v.loss;
  const int window_ms = st.config.manifest.liveness.rejoin_window_ms;
  log::error("supervisor", "node " + node + " lost (" + why + "); its roles wait " +
                               std::to_string(window_ms) + " ms for it to answer again");
  cluster_event(self, "node_lost", node, "", why);
  self->delayed_send(self, std::chrono::milliseconds(window_ms), rejoin_atom_v, node, v.loss);
  // Spawns under way there will not be answered (the connection they went over is gone, and
  // CAF fails such a request only at its timeout): they wait for the node like its roles.
  for (auto& [name, c] : st.children) {
    if (c.spawning && c.node == node) {
      c.spawning = false;
      ++c.attempt;
      c.awaiting_node = true;
    }
  }
}

// Children waiting for `node` (or for any node, having nowhere else to go) run on it now.
void spawn_awaiting(supervisor_pointer self, const std::string& node) {
  auto& st = self->state;
  for (auto& [name, c] : st.children) {
    if (!c.awaiting_node || c.alive || c.spawning) continue;
    const node_view& own = st.nodes[c.node];
    if (c.node != node && own.lost && own.window_open) continue;  // its own node may answer
    if (c.node != node && !own.lost) continue;
    c.node = node;
    spawn_child(self, c);
  }
}

// Roles the placement puts on `node` that run elsewhere now go back, one stop and start each.
void bring_home(supervisor_pointer self, const std::string& node) {
  auto& st = self->state;
  for (auto& [name, c] : st.children) {
    if (c.home != node || c.node == node || !c.alive || c.spawning || c.moving_home) continue;
    log::info("supervisor", c.name + " goes back to its node " + node + " (it ran on " + c.node +
                                " while " + node + " was out of contact)");
    c.moving_home = true;
    self->send_exit(c.handle, caf::exit_reason::user_shutdown);
  }
}

// A held role whose child still waits for that node is taken back; the shard must still hold the
// layout workers route with, or it is replaced.
void adopt_held(supervisor_pointer self, const std::string& node, const held_role& h) {
  auto& st = self->state;
  auto it = st.children.find(h.name);
  if (it == st.children.end()) return;
  supervised_child& c = it->second;
  if (c.alive || c.spawning) {  // replaced meanwhile
    self->send_exit(h.handle, caf::exit_reason::user_shutdown);
    return;
  }
  c.node = node;
  const std::string name = c.name;
  if (c.role == role_kind::expert_shard) {
    c.spawning = true;
    const auto shard = caf::actor_cast<expert_shard_actor>(h.handle);
    self->request(shard, std::chrono::seconds(2), rebind_atom_v,
                  caf::actor_cast<load_sink_actor>(self), st.balance->current().epoch())
        .then(
            [self, name, handle = h.handle](bool consistent) {
              auto& s = self->state;
              supervised_child& child = s.children.at(name);
              child.spawning = false;
              if (consistent) return child_up(self, name, handle, true);
              log::warn("supervisor", name + " came back without the current layout: replaced");
              self->send_exit(handle, caf::exit_reason::user_shutdown);
              spawn_child(self, child);
            },
            [self, name](caf::error& err) {
              supervised_child& child = self->state.children.at(name);
              child.spawning = false;
              log::warn("supervisor", name + " did not answer its adoption (" +
                                          self->system().render(err) + "): replaced");
              spawn_child(self, child);
            });
    return;
  }
  if (c.role == role_kind::decode) {
    self->send(caf::actor_cast<decode_worker_actor>(h.handle), rebind_atom_v,
               generation_report_actor{st.router}, caf::actor_cast<layout_ack_actor>(self));
  } else if (c.role == role_kind::prefill) {
    self->send(caf::actor_cast<prefill_worker_actor>(h.handle), rebind_atom_v,
               prefill_report_actor{st.router}, caf::actor_cast<layout_ack_actor>(self));
  }
  child_up(self, name, h.handle, true);
}

}  // namespace

std::string replacement_node(const supervisor_state& st) {
  std::map<std::string, int> load;
  for (const auto& [name, agent] : st.config.agents) {
    auto v = st.nodes.find(name);
    if (v == st.nodes.end() || !v->second.lost) load[name] = 0;
  }
  for (const auto& [name, c] : st.children) {
    if (load.count(c.node)) ++load[c.node];
  }
  auto suspected = [&](const std::string& node) {
    auto v = st.nodes.find(node);
    return v != st.nodes.end() && v->second.suspected;
  };
  std::string best;
  for (const auto& [node, n] : load) {
    if (best.empty() ||
        std::make_pair(suspected(node), n) < std::make_pair(suspected(best), load.at(best))) {
      best = node;
    }
  }
  return best;
}

void child_unreachable(supervisor_pointer self, supervised_child& c, const std::string& why) {
  auto& st = self->state;
  node_unreachable(self, c.node, why);
  const std::string cause = "node " + c.node + " unreachable (" + why + ")";
  caf::anon_send(st.registry, death_atom_v, c.name, cause, false);
  cluster_event(self, "role_unreachable", c.node, c.name, why);
  spawn_child(self, c);  // waits for the node while its window is open, else moves
}

void on_node_lost(supervisor_pointer self, const std::string& node, const std::string& why,
                  bool gone) {
  node_unreachable(self, node, why);
  // Its address refuses connections: the process is gone, its roles cannot be adopted back.
  if (gone) on_rejoin_window_over(self, node, self->state.nodes[node].loss);
}

void on_rejoin_window_over(supervisor_pointer self, const std::string& node, uint64_t loss) {
  auto& st = self->state;
  node_view& v = st.nodes[node];
  if (!v.lost || v.loss != loss || !v.window_open) return;
  v.window_open = false;
  int moved = 0;
  for (auto& [name, c] : st.children) {
    if (!c.awaiting_node || c.node != node || c.alive || c.spawning) continue;
    ++moved;
    spawn_child(self, c);
  }
  log::warn("supervisor", "node " + node + " did not answer within its rejoin window: " +
                              std::to_string(moved) + " roles move to other nodes");
}

void on_node_back(supervisor_pointer self, const std::string& node, node_agent_actor agent,
                  std::vector<held_role> held) {
  auto& st = self->state;
  st.config.agents[node] = agent;
  node_view& v = st.nodes[node];
  v.lost = false;
  v.window_open = false;
  v.suspected = false;
  std::vector<std::string> keep;
  for (const auto& h : held) {
    auto it = st.children.find(h.name);
    if (it == st.children.end()) continue;
    const supervised_child& c = it->second;
    if (c.role == h.role && c.awaiting_node && c.node == node && !c.alive && !c.spawning) {
      keep.push_back(h.name);
    }
  }
  cluster_event(self, "node_rejoined", node, "",
                std::to_string(keep.size()) + " of its " + std::to_string(held.size()) +
                    " roles adopted back");
  log::info("supervisor", "node " + node + " is back: adopting " + std::to_string(keep.size()) +
                              " of the " + std::to_string(held.size()) + " roles it holds");
  self->request(agent, std::chrono::seconds(10), adopt_atom_v,
                caf::actor_cast<node_owner_actor>(self), keep)
      .then(
          [self, node, held, keep](int32_t) {
            for (const auto& h : held) {
              if (std::find(keep.begin(), keep.end(), h.name) != keep.end()) {
                adopt_held(self, node, h);
              }
            }
            spawn_awaiting(self, node);
            bring_home(self, node);
          },
          [self, node](caf::error& err) {
            log::warn("supervisor", "node " + node + " refused the adoption (" +
                                        self->system().render(err) + "): its roles are respawned");
            spawn_awaiting(self, node);
          });
}

void on_node_leaving(supervisor_pointer self, const std::string& node) {
  auto& st = self->state;
  node_view& v = st.nodes[node];
  log::warn("supervisor", "node " + node + " is stopping: its roles move to other nodes");
  cluster_event(self, "node_leaving", node, "", "the node is stopping (SIGTERM)");
  v.lost = true;
  v.window_open = false;
  ++v.loss;
}

void on_suspect(supervisor_pointer self, const std::string& node, bool suspected) {
  auto& st = self->state;
  st.nodes[node].suspected = suspected;
  cluster_event(self, suspected ? "node_suspected" : "node_alive", node, "", "");
  self->send(st.router, suspect_atom_v, node, suspected);
}

}  // namespace brigade::deploy
