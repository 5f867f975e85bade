#include "cluster/node_agent.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <map>
#include <mutex>
#include <random>
#include <set>

#include "actors/model_context.hpp"
#include "actors/role_spawner.hpp"
#include "actors/sender_check.hpp"
#include "cluster/data_plane.hpp"
#include "cluster/fault_injection.hpp"
#include "cluster/join_secret.hpp"
#include "common/log.hpp"
#include "gpu/cpu/kernel_path.hpp"

namespace brigade::cluster {

using namespace actors;

namespace {

// Handshakes a node keeps open at once (a hello answered, its join not yet come).
constexpr size_t max_pending_hellos = 16;

// A role spawned here, kept weakly: its exit ends it.
struct owned_role {
  std::string name;
  role_kind role = role_kind::expert_shard;
  caf::actor_addr addr;
};

// The roles one coordinator's supervisor spawned here, and whether the node still hears from it.
struct owner_record {
  std::vector<owned_role> roles;
  bool in_contact = true;
  uint64_t loss = 0;  // names the current loss of contact for its grace timer
};

using owner_map = std::map<caf::actor_addr, owner_record>;

struct agent_state {
  node_agent_config config;
  std::unique_ptr<data_plane> plane;
  std::map<caf::node_id, std::pair<std::string, std::string>> nonces;  // coordinator's, ours
  std::set<caf::node_id> admitted;
  std::shared_ptr<const actors::model_context> ctx;
  std::string model_dir;
  int64_t grace_ms = 30000;
  uint64_t losses = 0;
  bool leaving = false;  // stopping: no new spawns
  // Keyed by the supervisor (an address equals any later handle to the same actor). Shared with
  // the agent's exit hook, which runs after the state is gone.
  std::shared_ptr<owner_map> owners = std::make_shared<owner_map>();
  static inline const char* name = "node_agent";
};

// Private: the end of a grace period (the number names which loss of contact it was).
using node_agent_impl = node_agent_actor::extend<caf::reacts_to<grace_atom, uint64_t>>;
using agent_pointer = node_agent_impl::stateful_pointer<agent_state>;

caf::node_id sender_node(agent_pointer self) {
  const auto& sender = self->current_sender();
  return sender ? sender->node() : caf::node_id{};
}

// Spawning and peers need an admitted coordinator; anyone else is refused and logged.
caf::error check_admitted(agent_pointer self, const char* what) {
  if (self->state.leaving && std::string(what) == "a spawn") {
    return caf::make_error(caf::sec::request_receiver_down, "node is stopping");
  }
  if (self->state.admitted.count(sender_node(self)) && self->state.plane) return caf::none;
  log::warn("node " + self->state.config.name, std::string("refused ") + what + " from " +
                                                   to_string(sender_node(self)) +
                                                   ": it has not proven the join secret");
  return caf::make_error(caf::sec::request_receiver_down, "not joined: prove the join secret");
}

// A spawn the node cannot honour: logged, and the coordinator gets the reason.
caf::error refused(agent_pointer self, const status& checked) {
  if (checked.ok()) return caf::none;
  log::warn("node " + self->state.config.name, checked.err().message);
  return caf::make_error(caf::sec::invalid_argument, checked.err().message);
}

// The model's config, read once per node on the first spawn that needs it; the weights load
// once per device that roles here ask for.
caf::error ensure_model(agent_pointer self, const std::string& dir) {
  auto& st = self->state;
  if (st.ctx) {
    if (dir == st.model_dir) return caf::none;
    return caf::make_error(caf::sec::runtime_error, "this node already serves " + st.model_dir);
  }
  log::info("node " + st.config.name, "loading " + dir);
  // The coordinator derives the same key from the same secret: nothing sends it. Only the
  // config here: each role loads the weights onto its device (model_context::on_device).
  auto ctx = actors::model_context::load_config(dir, block_hash_key(st.config.secret));
  if (!ctx) return caf::make_error(caf::sec::runtime_error, ctx.err().message);
  st.ctx = ctx.value();
  st.model_dir = dir;
  return caf::none;
}

// The data plane starts with the first coordinator's settings; its id is random so that nodes
// need no numbering of their own.
caf::error ensure_data_plane(agent_pointer self, const data_plane_settings& settings) {
  auto& st = self->state;
  if (st.plane) return caf::none;
  transport::transport_config cfg;
  cfg.tls = settings.tls;
  cfg.net_devices = settings.net_devices;
  std::random_device rd;
  cfg.self_id = (static_cast<uint64_t>(rd()) << 32) | rd();
  auto plane = data_plane::start(self->system(), cfg);
  if (!plane) {
    log::error("node " + st.config.name, "cannot start the data plane: " + plane.err().message);
    return caf::make_error(caf::sec::runtime_error, plane.err().message);
  }
  st.plane = std::move(plane.value());
  actors::remote_link::install(st.plane.get());
  log::info("node " + st.config.name,
            "data plane up (UCX_TLS=" + settings.tls +
                (settings.net_devices.empty() ? "" : " UCX_NET_DEVICES=" + settings.net_devices) +
                ")");
  return caf::none;
}

// Stops every role in `roles` that still runs.
void stop_roles(const std::vector<owned_role>& roles) {
  for (const auto& r : roles) {
    if (auto role = caf::actor_cast<caf::actor>(r.addr))
      caf::anon_send_exit(role, caf::exit_reason::user_shutdown);
  }
}

int spawned(const agent_state& st) {
  int n = 0;
  for (const auto& [owner, rec] : *st.owners)
    n += static_cast<int>(rec.roles.size());
  return n;
}

// Stops a coordinator's roles here and forgets them; with no coordinator left, a later one may
// bring another model.
void stop_owner(agent_pointer self, owner_map::iterator it, const std::string& why) {
  auto& st = self->state;
  log::warn("node " + st.config.name,
            "stopping " + std::to_string(it->second.roles.size()) + " roles: " + why);
  stop_roles(it->second.roles);
  st.owners->erase(it);
  if (st.owners->empty()) {
    st.ctx.reset();
    st.model_dir.clear();
  }
}

// A role that ended is no longer held: a coordinator that comes back must not be offered it
// (its handle can outlive it, and nothing would ever answer on it).
void role_ended(agent_pointer self, const caf::actor_addr& role) {
  for (auto& [owner, rec] : *self->state.owners) {
    auto& roles = rec.roles;
    roles.erase(std::remove_if(roles.begin(), roles.end(),
                               [&](const owned_role& r) { return r.addr == role; }),
                roles.end());
  }
}

// The roles a coordinator spawned live only as long as its supervisor. When the supervisor
// exits, they go too: left running they would hold the node's memory and threads for good, and
// keep the node from stopping. When only the connection to it was lost (a partition, a paused
// or crashed coordinator), the node keeps them for the grace period, so that a coordinator that
// comes back finds them as they were.
void owner_down(agent_pointer self, const caf::down_msg& dm) {
  auto& st = self->state;
  auto it = st.owners->find(dm.source);
  if (it == st.owners->end()) return role_ended(self, dm.source);
  st.admitted.erase(dm.source.node());
  const std::string why = self->system().render(dm.reason);
  if (dm.reason != caf::exit_reason::remote_link_unreachable || st.grace_ms <= 0) {
    return stop_owner(self, it, "the supervisor that spawned them is gone (" + why + ")");
  }
  it->second.in_contact = false;
  it->second.loss = ++st.losses;
  log::warn("node " + st.config.name, "lost contact with the coordinator that spawned " +
                                          std::to_string(it->second.roles.size()) +
                                          " roles here (" + why + "); keeping them " +
                                          std::to_string(st.grace_ms) + " ms for its return");
  self->delayed_send(self, std::chrono::milliseconds(st.grace_ms), grace_atom_v, it->second.loss);
}

// A coordinator proved the secret: roles held for other coordinators out of contact can never
// be adopted by this one, so they stop now instead of at the end of their grace.
void on_admitted(agent_pointer self, const caf::node_id& coordinator) {
  auto& st = self->state;
  for (auto it = st.owners->begin(); it != st.owners->end();) {
    auto next = std::next(it);
    if (!it->second.in_contact && it->first.node() != coordinator) {
      stop_owner(self, it, "another coordinator (" + to_string(coordinator) + ") joined");
    }
    it = next;
  }
}

// The roles held for coordinators of the asking process.
std::vector<held_role> holdings(agent_pointer self) {
  std::vector<held_role> out;
  const caf::node_id asker = sender_node(self);
  for (const auto& [owner, rec] : *self->state.owners) {
    if (owner.node() != asker) continue;
    for (const auto& r : rec.roles) {
      if (auto h = caf::actor_cast<caf::actor>(r.addr)) out.push_back({r.name, r.role, h});
    }
  }
  return out;
}

// The asking coordinator's supervisor takes back the roles named in `keep`; its other roles
// here stop. Returns the number kept.
int32_t adopt(agent_pointer self, const node_owner_actor& supervisor,
              const std::vector<std::string>& keep) {
  auto& st = self->state;
  const caf::node_id asker = sender_node(self);
  std::vector<owned_role> kept, dropped;
  for (auto it = st.owners->begin(); it != st.owners->end();) {
    if (it->first.node() != asker) {
      ++it;
      continue;
    }
    for (auto& r : it->second.roles) {
      const bool wanted = std::find(keep.begin(), keep.end(), r.name) != keep.end();
      (wanted && caf::actor_cast<caf::actor>(r.addr) ? kept : dropped).push_back(std::move(r));
    }
    it = st.owners->erase(it);
  }
  stop_roles(dropped);
  const auto kept_count = static_cast<int32_t>(kept.size());
  if (!kept.empty() && supervisor) {
    owner_record& rec = (*st.owners)[caf::actor_cast<caf::actor_addr>(supervisor)];
    rec.roles = std::move(kept);
    self->monitor(supervisor);
  }
  log::info("node " + st.config.name, "coordinator " + to_string(asker) + " is back: kept " +
                                          std::to_string(kept_count) + " of its roles, stopped " +
                                          std::to_string(dropped.size()));
  return kept_count;
}

// Spawns a role for the asking coordinator, through the one spawner table, and keeps it: the
// data plane can reach it, the node monitors it, and it is the coordinator's while it lives.
caf::result<caf::actor> spawn_for(agent_pointer self, const std::string& dir, role_spec& spec) {
  auto& st = self->state;
  const role_kind kind = kind_of(spec);
  const std::string name = name_of(spec);
  if (spawner_for(kind).needs_model) {
    if (auto err = ensure_model(self, dir)) return err;
  }
  auto spawned_role = spawn_role(self->system(), st.ctx, std::move(spec), st.config.name);
  if (!spawned_role) return refused(self, status(spawned_role.err()));
  caf::actor h = std::move(spawned_role.value());
  st.plane->register_local(h);
  const caf::actor_addr owner = caf::actor_cast<caf::actor_addr>(self->current_sender());
  auto [it, first] = st.owners->try_emplace(owner);
  // A supervisor seen again after a lost contact is watched through its new connection.
  if ((first || !it->second.in_contact) && owner) {
    self->monitor(caf::actor_cast<caf::actor>(self->current_sender()));
    it->second.in_contact = true;
  }
  it->second.roles.push_back({name, kind, caf::actor_cast<caf::actor_addr>(h)});
  self->monitor(h);
  if (auto census = st.config.census) {
    census->add(name);
    h->attach_functor([census, name](const caf::error&) { census->remove(name); });
  }
  log::info("node " + st.config.name, "spawned " + name);
  return h;
}

node_agent_impl::behavior_type agent_behavior(agent_pointer self, node_agent_config config) {
  self->state.config = std::move(config);
  self->set_down_handler([=](caf::down_msg& dm) { owner_down(self, dm); });
  // The node stopping stops its roles, or the actor system would wait for them for good.
  self->attach_functor([owners = self->state.owners](const caf::error&) {
    for (const auto& [owner, rec] : *owners)
      stop_roles(rec.roles);
  });
  return {
      [=](hello_atom, const std::string& coordinator_nonce) -> caf::result<node_hello> {
        auto& st = self->state;
        // Anyone may say hello: keep what it costs bounded, a nonce of the size coordinators
        // send and a handshake in flight for a few peers at most.
        if (coordinator_nonce.size() != nonce_chars) {
          return caf::make_error(
              caf::sec::invalid_argument,
              "a hello carries a nonce of " + std::to_string(nonce_chars) + " characters");
        }
        const std::string ours = random_nonce();
        if (!st.nonces.count(sender_node(self)) && st.nonces.size() >= max_pending_hellos) {
          st.nonces.erase(st.nonces.begin());
        }
        st.nonces[sender_node(self)] = {coordinator_nonce, ours};
        node_hello h;
        h.name = st.config.name;
        h.nonce = ours;
        h.proof = join_proof(st.config.secret, "node", coordinator_nonce, ours);
        h.numerics = gpu::cpu::process_numerics_name();
        return h;
      },
      [=](join_atom, const std::string& proof,
          const data_plane_settings& settings) -> caf::result<node_joined> {
        auto& st = self->state;
        const caf::node_id peer = sender_node(self);
        auto it = st.nonces.find(peer);
        const bool ok = it != st.nonces.end() &&
                        proofs_equal(proof, join_proof(st.config.secret, "coordinator",
                                                       it->second.second, it->second.first));
        if (it != st.nonces.end()) st.nonces.erase(it);
        if (!ok) {
          log::warn("node " + st.config.name,
                    "refused coordinator " + to_string(peer) + ": wrong join secret");
          return caf::make_error(caf::sec::request_receiver_down, "wrong join secret");
        }
        st.admitted.insert(peer);
        st.grace_ms = settings.grace_ms;
        log::info("node " + st.config.name, "joined by coordinator " + to_string(peer));
        on_admitted(self, peer);
        if (auto err = ensure_data_plane(self, settings)) return err;
        node_joined j;
        j.peer_id = st.plane->self();
        for (std::byte b : st.plane->address())
          j.address.push_back(static_cast<uint8_t>(b));
        return j;
      },
      [=](spawn_atom, const std::string& dir, role_spec& spec) -> caf::result<caf::actor> {
        if (auto err = check_admitted(self, "a spawn")) return err;
        return spawn_for(self, dir, spec);
      },
      [=](peers_atom, std::vector<peer_info>& peers) -> caf::result<bool> {
        if (auto err = check_admitted(self, "a peer list")) return err;
        for (const auto& p : peers) {
          peer_entry e;
          e.id = p.id;
          e.name = p.name;
          e.node = p.node;
          for (uint8_t b : p.address)
            e.address.push_back(static_cast<std::byte>(b));
          status added = self->state.plane->add_peer(e);
          if (!added) return caf::make_error(caf::sec::runtime_error, added.err().message);
        }
        std::vector<uint64_t> ids;
        for (const auto& p : peers)
          ids.push_back(p.id);
        self->state.plane->retain_peers(ids);
        return true;
      },
      [=](peer_down_atom, uint64_t peer, const std::string& why) {
        if (check_admitted(self, "a peer_down")) return;
        self->state.plane->peer_down(peer, why);
      },
      [=](ping_atom) -> caf::result<int64_t> {
        if (auto err = check_admitted(self, "a ping")) return err;
        return std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now().time_since_epoch())
            .count();
      },
      [=](holdings_atom) -> caf::result<std::vector<held_role>> {
        if (auto err = check_admitted(self, "a holdings request")) return err;
        return holdings(self);
      },
      [=](adopt_atom, const node_owner_actor& supervisor,
          const std::vector<std::string>& keep) -> caf::result<int32_t> {
        if (auto err = check_admitted(self, "an adoption")) return err;
        return adopt(self, supervisor, keep);
      },
      [=](fault_atom, const node_fault& fault) -> caf::result<bool> {
        if (auto err = check_admitted(self, "a fault")) return err;
        status set = apply_fault(self->state.config.name, fault);
        if (!set) return caf::make_error(caf::sec::invalid_argument, set.err().message);
        return true;
      },
      [=](grace_atom, uint64_t loss) {
        auto& st = self->state;
        if (!sent_by(self->current_sender(), self)) return;
        for (auto it = st.owners->begin(); it != st.owners->end(); ++it) {
          if (!it->second.in_contact && it->second.loss == loss) {
            return stop_owner(self, it,
                              "their coordinator did not come back within the grace period (" +
                                  std::to_string(st.grace_ms) + " ms)");
          }
        }
      },
      [=](leave_atom) {
        auto& st = self->state;
        if (!sent_locally(self->current_sender(), self->node())) return;
        st.leaving = true;
        for (const auto& [owner, rec] : *st.owners) {
          if (!rec.in_contact) continue;
          if (auto supervisor = caf::actor_cast<node_owner_actor>(owner)) {
            self->send(supervisor, leave_atom_v, st.config.name);
          }
        }
        log::warn("node " + st.config.name,
                  "leaving: stopping " + std::to_string(spawned(st)) + " roles");
        self->quit(caf::exit_reason::user_shutdown);  // the exit hook stops the roles
      },
      [=](status_atom) {
        const auto& st = self->state;
        node_agent_status s;
        s.load.name = st.config.name;
        s.load.role = "node_agent";
        s.load.in_flight = spawned(st);
        s.model = st.model_dir;
        s.coordinators = static_cast<int32_t>(st.admitted.size());
        return s;
      },
  };
}

}  // namespace

node_agent_actor spawn_node_agent(caf::actor_system& sys, node_agent_config config) {
  return sys.spawn(agent_behavior, std::move(config));
}

void register_node_agent_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<node_hello>("brigade::node_hello");
  cfg.add_message_type<data_plane_settings>("brigade::data_plane_settings");
  cfg.add_message_type<node_joined>("brigade::node_joined");
  cfg.add_message_type<peer_info>("brigade::peer_info");
  cfg.add_message_type<std::vector<peer_info>>("std::vector<brigade::peer_info>");
  cfg.add_message_type<held_role>("brigade::held_role");
  cfg.add_message_type<std::vector<held_role>>("std::vector<brigade::held_role>");
  cfg.add_message_type<node_fault>("brigade::node_fault");
  cfg.add_message_type<node_agent_status>("brigade::node_agent_status");
  cfg.add_message_type<node_owner_actor>("brigade::node_owner_actor");
  cfg.add_message_type<node_agent_actor>("brigade::node_agent_actor");
}

}  // namespace brigade::cluster
