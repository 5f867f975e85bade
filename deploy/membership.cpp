#include "deploy/membership.hpp"

#include <algorithm>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "actors/sender_check.hpp"
#include "cluster/failure_detector.hpp"
#include "cluster/join_secret.hpp"
#include "common/log.hpp"
#include "common/wall_clock.hpp"
#include "gpu/cpu/kernel_path.hpp"

namespace brigade::deploy {

using namespace brigade::actors;

namespace {

using steady = std::chrono::steady_clock;

// How long one dial (TCP connect and CAF's handshake) and one handshake request may take.
constexpr std::chrono::milliseconds dial_timeout{2000};
constexpr std::chrono::milliseconds handshake_timeout{5000};

double steady_ms() {
  return std::chrono::duration<double, std::milli>(steady::now().time_since_epoch()).count();
}

struct node_record {
  config::node_spec spec;
  std::string host;
  uint16_t port = 0;
  std::string state = "joining";
  int64_t since_ms = 0;
  uint32_t joins = 0;
  node_agent_actor agent;
  uint64_t peer_id = 0;
  std::vector<uint8_t> address;
  caf::node_id caf_node;  // its actor system, whose handles live there
  cluster::failure_detector detector;
  uint64_t dial_round = 0;  // names the dial in flight; an older one's answer is dropped
  uint64_t losses = 0;      // names the current loss, for its timer
  bool peers_told = false;  // the other nodes' data planes were told it is down
  bool gone_told = false;   // the supervisor was told it is gone, this loss
  int failed_dials = 0;     // since the last join, for the back-off
  bool dialing = false;
  std::string last_error;
};

struct membership_state {
  config::manifest m;
  std::string secret;
  registry_actor registry;
  supervisor_actor supervisor;
  std::map<std::string, node_record> nodes;
  std::optional<caf::typed_response_promise<std::vector<joined_node>>> initial;
  steady::time_point initial_deadline;
  double last_tick_ms = 0;  // when the heartbeat tick last ran
  /// Per node, the rules its partitions and severs put on the other end of each link: (peer,
  /// rule). A clear of the node clears them too: a peer that got its rule late (it was stopped
  /// when ordered) would otherwise keep the link cut past the heal, for its own for_ms.
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> peer_rules;
  static inline const char* name = "membership";
};

// Private: its timers (the heartbeat tick, a re-dial of a node, the end of a lost node's rejoin
// window before peers hear of it; the numbers name which round or loss).
using membership_impl =
    membership_actor::extend<caf::reacts_to<tick_atom>,
                             caf::reacts_to<dial_atom, std::string, uint64_t>,
                             caf::reacts_to<peer_down_atom, std::string, uint64_t>>;
using membership_pointer = membership_impl::stateful_pointer<membership_state>;

void dial(membership_pointer self, const std::string& name);

// The other nodes' data planes fail what is in flight to a lost node, and stop reconnecting to
// it. Only once it is taken for gone (its address refuses connections, or it stayed silent
// through the rejoin window): a node that only lost its coordinator keeps its data-plane links.
void tell_peers_down(membership_pointer self, node_record& n) {
  auto& st = self->state;
  if (n.peers_told || n.state != "lost") return;
  n.peers_told = true;
  for (const auto& [other, o] : st.nodes) {
    if (o.agent && other != n.spec.name) {
      self->send(o.agent, peer_down_atom_v, n.peer_id, "node " + n.spec.name + " lost");
    }
  }
}

// A node's state changed: the registry, the log and the supervisor's event stream learn it.
void set_state(membership_pointer self, node_record& n, const std::string& state,
               const std::string& detail) {
  if (n.state == state) return;
  n.state = state;
  n.since_ms = unix_ms();
  node_entry e{n.spec.name, n.spec.address, state, n.since_ms, n.joins, detail};
  caf::anon_send(self->state.registry, node_atom_v, e);
  (state == "alive" ? log::info : log::warn)(
      "membership", "node " + n.spec.name + " " + state + (detail.empty() ? "" : ": " + detail));
}

// Every node whose data plane is still taken to be there: a node lost but within its rejoin
// window is listed (its links stay up), one the others were told is down is not.
std::vector<peer_info> peer_list(const membership_state& st) {
  std::vector<peer_info> peers;
  for (const auto& [name, n] : st.nodes) {
    if (n.peer_id != 0 && !n.peers_told) peers.push_back({n.peer_id, name, n.caf_node, n.address});
  }
  return peers;
}

// Tells one node where every node's data plane is. A node that has the list already keeps its
// endpoints.
void tell_peers(membership_pointer self, const std::string& name,
                const std::vector<peer_info>& peers) {
  const node_agent_actor agent = self->state.nodes.at(name).agent;
  if (!agent) return;
  self->request(agent, handshake_timeout, peers_atom_v, peers)
      .then([](bool) {},
            [self, name](caf::error& err) {
              log::warn("membership",
                        "node " + name + " cannot reach its peers: " + self->system().render(err));
            });
}

// Every node in contact learns where every other node's data plane is: the one that joined
// connects to the others, and they to it (a node that kept its data plane keeps its endpoints).
void announce_peers(membership_pointer self) {
  const auto peers = peer_list(self->state);
  for (const auto& p : peers)
    tell_peers(self, p.name, peers);
}

// The back-off before the next dial of a node that did not answer: 100 ms doubling, bounded.
std::chrono::milliseconds redial_delay(const membership_state& st, const node_record& n) {
  const int shift = std::min(n.failed_dials, 10);
  const int64_t ms = std::min<int64_t>(int64_t{100} << shift, st.m.liveness.redial_max_backoff_ms);
  return std::chrono::milliseconds(ms);
}

void dial_failed(membership_pointer self, const std::string& name, const std::string& why,
                 bool refused, bool gone = false) {
  auto& st = self->state;
  node_record& n = st.nodes.at(name);
  n.dialing = false;
  n.last_error = why;
  // The first re-dial after a loss that finds nothing listening: the process is gone, and the
  // supervisor need not wait out the rejoin window for it.
  if (gone && !n.gone_told && n.state == "lost") {
    n.gone_told = true;
    tell_peers_down(self, n);
    if (st.supervisor) self->send(st.supervisor, node_lost_atom_v, name, why, true);
  }
  if (n.state == "lost" && (n.failed_dials % 10) == 0) {
    log::info("membership", "re-dial " + std::to_string(n.failed_dials + 1) + " of node " + name +
                                " failed: " + why);
  }
  ++n.failed_dials;
  if (st.initial) {
    if (refused || steady::now() >= st.initial_deadline) {
      st.initial->deliver(caf::make_error(caf::sec::runtime_error, why));
      st.initial.reset();
    } else {
      self->delayed_send(self, std::chrono::milliseconds(200), dial_atom_v, name, n.dial_round);
    }
    return;
  }
  if (n.state == "lost") {
    self->delayed_send(self, redial_delay(st, n), dial_atom_v, name, n.dial_round);
  }
}

void initial_join_done(membership_pointer self) {
  auto& st = self->state;
  std::vector<joined_node> out;
  for (const auto& [name, n] : st.nodes) {
    if (n.state != "alive") return;
    out.push_back({name, n.agent, n.peer_id, n.address});
  }
  announce_peers(self);
  st.initial->deliver(std::move(out));
  st.initial.reset();
}

// The node answered the handshake: it is ours again. A first join completes the initial join;
// a rejoin tells the supervisor which roles the node still holds.
void joined(membership_pointer self, const std::string& name, node_agent_actor agent,
            const node_joined& j) {
  auto& st = self->state;
  node_record& n = st.nodes.at(name);
  const bool rejoin = n.joins > 0;
  n.dialing = false;
  n.failed_dials = 0;
  n.agent = std::move(agent);
  n.peer_id = j.peer_id;
  n.address = j.address;
  n.caf_node = n.agent->node();
  // The other nodes dropped their links to it (it stayed lost past the rejoin window); it kept
  // its own, which now point at closed endpoints: UCX over TCP notices that only after many
  // seconds, and the links the others make meanwhile are not heard. It drops them too, before
  // the peer list below has both ends connect afresh. (Messages from here to one agent keep
  // their order.) A node back within the window kept its links on both ends.
  if (rejoin && n.peers_told) {
    for (const auto& [other, o] : st.nodes) {
      if (other == name || o.peer_id == 0 || o.peers_told) continue;
      self->send(n.agent, peer_down_atom_v, o.peer_id,
                 "node " + name + " was declared lost: its links are made afresh");
    }
  }
  n.peers_told = false;
  n.detector.reset();
  n.detector.heartbeat(steady_ms());
  ++n.joins;
  self->monitor(n.agent);
  log::info("membership", "node " + name + " joined (" + n.spec.address + ")");
  if (!rejoin) {
    set_state(self, n, "alive", "");
    if (st.initial) initial_join_done(self);
    return;
  }
  set_state(self, n, "rejoining", "answered a re-dial");
  announce_peers(self);
  self->request(n.agent, handshake_timeout, holdings_atom_v)
      .then(
          [self, name](std::vector<held_role>& held) {
            auto& s = self->state;
            node_record& rec = s.nodes.at(name);
            set_state(self, rec, "alive", std::to_string(held.size()) + " roles still held");
            if (s.supervisor) self->send(s.supervisor, node_back_atom_v, name, rec.agent, held);
          },
          [self, name](caf::error& err) {
            log::warn("membership", "node " + name + " did not list its roles (" +
                                        self->system().render(err) + "); they are replaced");
            auto& s = self->state;
            node_record& rec = s.nodes.at(name);
            set_state(self, rec, "alive", "");
            if (s.supervisor) {
              self->send(s.supervisor, node_back_atom_v, name, rec.agent, std::vector<held_role>{});
            }
          });
}

// Both sides prove the secret over each other's nonces; a node with another secret is refused.
void handshake(membership_pointer self, const std::string& name, node_agent_actor agent,
               uint64_t round) {
  const std::string ours = cluster::random_nonce();
  // A live node answers in milliseconds; CAF may hand out the handle of a connection that just
  // closed, on which nothing ever answers: a re-dial gives up on it soon and tries again.
  const auto wait =
      self->state.nodes.at(name).joins > 0 ? std::chrono::milliseconds(1000) : handshake_timeout;
  self->request(agent, wait, hello_atom_v, ours)
      .then(
          [=](node_hello& h) {
            auto& st = self->state;
            node_record& n = st.nodes.at(name);
            if (round != n.dial_round) return;
            if (!cluster::proofs_equal(h.proof,
                                       cluster::join_proof(st.secret, "node", ours, h.nonce))) {
              return dial_failed(self, name,
                                 "node '" + name + "' at " + n.spec.address +
                                     " failed the join secret check: it was started with "
                                     "another secret; refusing it",
                                 true);
            }
            const std::string ours_numerics = gpu::cpu::process_numerics_name();
            if (h.numerics != ours_numerics) {
              return dial_failed(
                  self, name,
                  "node '" + name + "' at " + n.spec.address + " computes in " +
                      (h.numerics.empty() ? std::string("unknown") : h.numerics) +
                      " numerics and this coordinator in " + ours_numerics +
                      ": their answers would differ, so it is refused. Start every process "
                      "with the same BRIGADE_CPU_KERNELS class (" +
                      (ours_numerics == "f32" ? "unset, auto, avx2 or avx512"
                                              : "avx512_bf16 or amx_bf16") +
                      ")",
                  true);
            }
            data_plane_settings settings{st.m.transport.tls, st.m.transport.net_devices,
                                         st.m.liveness.grace_ms};
            self->request(agent, handshake_timeout, join_atom_v,
                          cluster::join_proof(st.secret, "coordinator", h.nonce, ours), settings)
                .then(
                    [=](node_joined& j) {
                      if (round != self->state.nodes.at(name).dial_round) return;
                      joined(self, name, agent, j);
                    },
                    [=](caf::error& err) {
                      dial_failed(
                          self, name,
                          "node '" + name + "' refused to join: " + self->system().render(err),
                          true);
                    });
          },
          [=](caf::error& err) {
            if (round != self->state.nodes.at(name).dial_round) return;
            dial_failed(self, name,
                        "node '" + name + "': hello failed: " + self->system().render(err), false);
          });
}

void dial(membership_pointer self, const std::string& name) {
  auto& st = self->state;
  node_record& n = st.nodes.at(name);
  if (n.dialing) return;
  n.dialing = true;
  const uint64_t round = ++n.dial_round;
  auto mm = self->system().middleman().actor_handle();
  self->request(mm, dial_timeout, caf::connect_atom_v, n.host, n.port)
      .then(
          [=](caf::node_id&, caf::strong_actor_ptr& ptr, std::set<std::string>&) {
            if (round != self->state.nodes.at(name).dial_round) return;
            if (!ptr) {
              return dial_failed(self, name, "node '" + name + "' has no agent published", false);
            }
            handshake(self, name, caf::actor_cast<node_agent_actor>(ptr), round);
          },
          [=](caf::error& err) {
            if (round != self->state.nodes.at(name).dial_round) return;
            const auto& spec = self->state.nodes.at(name).spec;
            // Refused, or closed before CAF's handshake (a proxy in front of a dead node): the
            // process is not there. A hung one lets the handshake time out instead.
            const bool gone = err == caf::sec::cannot_connect_to_node ||
                              err == caf::sec::disconnect_during_handshake;
            dial_failed(self, name,
                        "node '" + name + "' at " + spec.address + " did not answer (" +
                            self->system().render(err) + "); is `brigade node --listen " +
                            spec.address + "` running?",
                        false, gone);
          });
}

// A node's agent is gone: its connection closed (the process died, or a side declared the other
// dead after dead_after of silence). The supervisor decides about its roles; we re-dial.
void on_down(membership_pointer self, const caf::down_msg& dm) {
  auto& st = self->state;
  for (auto& [name, n] : st.nodes) {
    if (!n.agent || n.agent.address() != dm.source) continue;
    const std::string why = self->system().render(dm.reason);
    set_state(self, n, "lost", why);
    n.agent = nullptr;
    n.dialing = false;
    n.failed_dials = 0;
    n.peers_told = false;
    n.gone_told = false;
    ++n.losses;
    self->delayed_send(self, std::chrono::milliseconds(st.m.liveness.rejoin_window_ms),
                       peer_down_atom_v, name, n.losses);
    if (st.supervisor) self->send(st.supervisor, node_lost_atom_v, name, why, false);
    // The first re-dial waits a moment: CAF's middleman forgets the closed connection to the
    // node when it sees the same loss, and a dial before that gets the dead handle back.
    self->delayed_send(self, std::chrono::milliseconds(50), dial_atom_v, name, n.dial_round);
    return;
  }
}

// Pings every node in contact, and moves nodes between alive and suspected by their phi.
void heartbeat(membership_pointer self) {
  auto& st = self->state;
  const double now = steady_ms();
  // A tick far later than due means this process did not run (stopped, starved): the silence
  // was ours. The nodes' histories would learn our stall as their jitter and let a later hang
  // of theirs pass unsuspected: they start afresh instead.
  const double due_ms = 3.0 * st.m.liveness.heartbeat_ms + 200;
  if (st.last_tick_ms > 0 && now - st.last_tick_ms > due_ms) {
    for (auto& [name, n] : st.nodes) {
      n.detector.reset();
      n.detector.heartbeat(now);
    }
  }
  st.last_tick_ms = now;
  for (auto& [name, n] : st.nodes) {
    if (!n.agent || (n.state != "alive" && n.state != "suspected")) continue;
    const double phi = n.detector.phi(now);
    // phi adapts to the jitter it learnt; a node slow to answer under load for a while teaches
    // it a wide spread. Silence past two thirds of dead_after is suspicious whatever it learnt,
    // so that a hang is always suspected well before the node is declared lost.
    const bool long_silence = n.detector.silence_ms(now) >= st.m.liveness.dead_after_ms * 2.0 / 3.0;
    if (n.state == "alive" && (phi >= st.m.liveness.suspect_phi || long_silence)) {
      char detail[96];
      std::snprintf(detail, sizeof detail, "silent for %.0f ms (phi %.1f)",
                    n.detector.silence_ms(now), phi);
      set_state(self, n, "suspected", detail);
      if (st.supervisor) self->send(st.supervisor, suspect_atom_v, name, true);
    }
    self->request(n.agent, std::chrono::milliseconds(st.m.liveness.dead_after_ms), ping_atom_v)
        .then(
            [self, name](int64_t) {
              auto& s = self->state;
              node_record& rec = s.nodes.at(name);
              // The silence that made the node suspect was a fault, not jitter: learnt as an
              // interval, it would raise the mean and spread so far that the next hang of the
              // same length passed unsuspected. Its history starts afresh instead.
              if (rec.state == "suspected") rec.detector.reset();
              rec.detector.heartbeat(steady_ms());
              if (rec.state == "suspected") {
                set_state(self, rec, "alive", "heartbeats again");
                if (s.supervisor) self->send(s.supervisor, suspect_atom_v, name, false);
                // An announcement sent while it was silent (a node that rejoined meanwhile, under
                // a new peer) may never have reached it.
                tell_peers(self, name, peer_list(s));
              }
            },
            [](caf::error&) {});
  }
  self->delayed_send(self, std::chrono::milliseconds(st.m.liveness.heartbeat_ms), tick_atom_v);
}

node_status status_of(const node_record& n) {
  node_status s;
  s.load.name = n.spec.name;
  s.load.role = "node";
  s.address = n.spec.address;
  s.state = n.state;
  s.since_ms = n.since_ms;
  s.joins = n.joins;
  s.peer_id = n.peer_id;
  s.last_error = n.last_error;
  return s;
}

// The node_fault one node applies for an order: its data-plane rule names peers by their ids.
std::string fault_spec(const fault_order& o, const std::string& direction, uint64_t peer) {
  std::string spec = o.kind;
  if (o.kind == "partition") spec = "drop";
  if (peer != 0) spec += " " + direction + "=" + std::to_string(peer);
  if (o.rate < 1.0) spec += " rate=" + std::to_string(o.rate);
  if (o.ms > 0 && o.kind != "partition") spec += " ms=" + std::to_string(o.ms);
  spec += " seed=" + std::to_string(o.seed);
  return spec;
}

// Sends the order's rules to the nodes concerned. A partition (or sever) of a node from a peer
// is a rule on both ends, one for each direction of the link.
std::string inject(membership_pointer self, const fault_order& o) {
  auto& st = self->state;
  auto target = st.nodes.find(o.node);
  if (target == st.nodes.end()) return "no node named '" + o.node + "'";
  std::vector<std::pair<std::string, node_fault>> orders;
  const std::string name = "admin-" + o.kind + "-" + o.node + (o.peer.empty() ? "" : "-" + o.peer);
  if (o.kind == "clear") {
    // The peers' ends too, even when the node itself is out of contact.
    auto ends = st.peer_rules.find(o.node);
    if (ends != st.peer_rules.end()) {
      for (const auto& [peer, rule] : ends->second)
        orders.push_back({peer, node_fault{rule, "", 0}});
      st.peer_rules.erase(ends);
    }
    if (target->second.agent) {
      orders.push_back({o.node, node_fault{"", "", 0}});
    } else if (orders.empty()) {
      return "node '" + o.node + "' is not in contact";
    }
  } else if (!target->second.agent) {
    return "node '" + o.node + "' is not in contact";
  } else if (o.kind == "disk_slow" || o.kind == "disk_full") {
    const std::string spec =
        o.kind == "disk_full" ? "disk full" : "disk slow ms=" + std::to_string(o.ms);
    orders.push_back({o.node, node_fault{name, spec, o.for_ms}});
  } else {
    std::vector<std::string> peers;
    if (o.peer == "*") {
      for (const auto& [other, n] : st.nodes) {
        if (other != o.node) peers.push_back(other);
      }
    } else if (!o.peer.empty()) {
      if (!st.nodes.count(o.peer)) return "no node named '" + o.peer + "'";
      peers.push_back(o.peer);
    }
    const bool both_ends = o.kind == "partition" || o.kind == "sever";
    if (peers.empty())
      orders.push_back({o.node, node_fault{name, fault_spec(o, "to", 0), o.for_ms}});
    for (const auto& p : peers) {
      const uint64_t peer_id = st.nodes.at(p).peer_id;
      const uint64_t own_id = target->second.peer_id;
      orders.push_back(
          {o.node, node_fault{name + "-" + p, fault_spec(o, "to", peer_id), o.for_ms}});
      if (both_ends && st.nodes.at(p).agent) {
        orders.push_back({p, node_fault{name + "-" + p, fault_spec(o, "to", own_id), o.for_ms}});
        auto& ends = st.peer_rules[o.node];
        const std::pair<std::string, std::string> end{p, name + "-" + p};
        if (std::find(ends.begin(), ends.end(), end) == ends.end()) ends.push_back(end);
      }
    }
  }
  for (const auto& [node, fault] : orders) {
    const node_agent_actor agent = st.nodes.at(node).agent;
    if (!agent) continue;
    self->request(agent, handshake_timeout, fault_atom_v, fault)
        .then([](bool) {},
              [self, node = node](caf::error& err) {
                log::warn("membership",
                          "node " + node + " refused a fault: " + self->system().render(err));
              });
  }
  return "";
}

}  // namespace

static membership_impl::behavior_type membership_behavior(membership_pointer self,
                                                          config::manifest m, std::string secret,
                                                          registry_actor registry) {
  auto& st = self->state;
  st.m = std::move(m);
  st.secret = std::move(secret);
  st.registry = std::move(registry);
  cluster::failure_detector_options fd;
  fd.expected_interval_ms = st.m.liveness.heartbeat_ms;
  fd.min_std_ms = std::max(10.0, st.m.liveness.heartbeat_ms / 2.0);
  fd.acceptable_pause_ms = st.m.liveness.acceptable_pause_ms;
  for (const auto& spec : st.m.nodes) {
    node_record n;
    n.spec = spec;
    const auto colon = spec.address.rfind(':');
    n.host = spec.address.substr(0, colon);
    n.port = static_cast<uint16_t>(std::stoi(spec.address.substr(colon + 1)));
    n.detector = cluster::failure_detector(fd);
    st.nodes.emplace(spec.name, std::move(n));
  }
  self->set_down_handler([self](caf::down_msg& dm) { on_down(self, dm); });
  return {
      [=](join_atom) -> caf::result<std::vector<joined_node>> {
        auto& s = self->state;
        auto rp = self->make_response_promise<std::vector<joined_node>>();
        s.initial = rp;
        s.initial_deadline = steady::now() + std::chrono::seconds(30);
        for (auto& [name, n] : s.nodes)
          dial(self, name);
        self->send(self, tick_atom_v);
        return rp;
      },
      [=](supervise_atom, supervisor_actor& supervisor) {
        self->state.supervisor = std::move(supervisor);
      },
      [=](status_atom, bool) {
        std::vector<node_status> out;
        for (const auto& [name, n] : self->state.nodes)
          out.push_back(status_of(n));
        return out;
      },
      [=](fault_atom, const fault_order& order) { return inject(self, order); },
      [=](tick_atom) {
        if (!sent_by(self->current_sender(), self)) return;
        heartbeat(self);
      },
      [=](peer_down_atom, const std::string& name, uint64_t loss) {
        if (!sent_by(self->current_sender(), self)) return;
        auto it = self->state.nodes.find(name);
        if (it != self->state.nodes.end() && it->second.losses == loss) {
          tell_peers_down(self, it->second);
        }
      },
      [=](dial_atom, const std::string& name, uint64_t round) {
        auto& s = self->state;
        auto it = s.nodes.find(name);
        if (it == s.nodes.end() || it->second.dial_round != round || it->second.agent) return;
        if (it->second.state != "lost" && !s.initial) return;
        dial(self, name);
      },
  };
}

membership_actor spawn_membership(caf::actor_system& sys, const config::manifest& m,
                                  std::string secret, registry_actor registry) {
  return sys.spawn(membership_behavior, m, std::move(secret), std::move(registry));
}

}  // namespace brigade::deploy
