#include "cluster/node_agent.hpp"

#include <caf/all.hpp>

#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "actors/model_context.hpp"
#include "actors/spawn_checks.hpp"
#include "cluster/data_plane.hpp"
#include "cluster/join_secret.hpp"
#include "common/log.hpp"

namespace brigade::cluster {

using namespace actors;

namespace {

// Handshakes a node keeps open at once (a hello answered, its join not yet come).
constexpr size_t max_pending_hellos = 16;

struct agent_state {
  node_agent_config config;
  std::unique_ptr<data_plane> plane;
  std::map<caf::node_id, std::pair<std::string, std::string>> nonces;  // coordinator's, ours
  std::set<caf::node_id> admitted;
  std::shared_ptr<const actors::model_context> ctx;
  std::string model_dir;
  int spawned = 0;
  // The roles each coordinator's supervisor spawned here (weak: a role's exit ends it). Shared
  // with the agent's exit hook, which runs after the state is gone.
  std::shared_ptr<std::map<caf::actor_addr, std::vector<caf::actor_addr>>> roles_by_owner =
      std::make_shared<std::map<caf::actor_addr, std::vector<caf::actor_addr>>>();
  static inline const char* name = "node_agent";
};

using agent_pointer = node_agent_actor::stateful_pointer<agent_state>;

caf::node_id sender_node(agent_pointer self) {
  const auto& sender = self->current_sender();
  return sender ? sender->node() : caf::node_id{};
}

// Spawning and peers need an admitted coordinator; anyone else is refused and logged.
caf::error check_admitted(agent_pointer self, const char* what) {
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

// The model, loaded once per node on the first spawn that needs it.
caf::error ensure_model(agent_pointer self, const std::string& dir) {
  auto& st = self->state;
  if (st.ctx) {
    if (dir == st.model_dir) return caf::none;
    return caf::make_error(caf::sec::runtime_error, "this node already serves " + st.model_dir);
  }
  log::info("node " + st.config.name, "loading " + dir);
  auto ctx = actors::model_context::load(dir, {});
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
void stop_roles(const std::vector<caf::actor_addr>& roles) {
  for (const auto& addr : roles) {
    if (auto role = caf::actor_cast<caf::actor>(addr))
      caf::anon_send_exit(role, caf::exit_reason::user_shutdown);
  }
}

// The roles a coordinator spawned live only as long as its supervisor: when that dies (its
// process crashed or was killed, or the network to it is gone), they go too. Left running they
// would hold the node's memory and threads for good, and keep the node from stopping.
void owner_down(agent_pointer self, const caf::down_msg& dm) {
  auto& st = self->state;
  auto it = st.roles_by_owner->find(dm.source);
  if (it == st.roles_by_owner->end()) return;
  log::warn("node " + st.config.name,
            "the supervisor that spawned " + std::to_string(it->second.size()) +
                " roles here is gone (" + self->system().render(dm.reason) + "): stopping them");
  stop_roles(it->second);
  st.spawned -= static_cast<int>(it->second.size());
  st.roles_by_owner->erase(it);
  st.admitted.erase(dm.source.node());
  // With no coordinator left, a later one may bring another model.
  if (st.roles_by_owner->empty()) {
    st.ctx.reset();
    st.model_dir.clear();
  }
}

template <class Handle>
Handle registered(agent_pointer self, Handle h, const std::string& name) {
  auto& st = self->state;
  st.plane->register_local(caf::actor_cast<caf::actor>(h));
  const caf::actor_addr owner = caf::actor_cast<caf::actor_addr>(self->current_sender());
  auto [it, first] = st.roles_by_owner->try_emplace(owner);
  if (first && owner) self->monitor(owner);
  it->second.push_back(caf::actor_cast<caf::actor_addr>(h));
  ++st.spawned;
  log::info("node " + st.config.name, "spawned " + name);
  return h;
}

node_agent_actor::behavior_type agent_behavior(agent_pointer self, node_agent_config config) {
  self->state.config = std::move(config);
  self->set_down_handler([=](caf::down_msg& dm) { owner_down(self, dm); });
  // The node stopping stops its roles, or the actor system would wait for them for good.
  self->attach_functor([roles = self->state.roles_by_owner](const caf::error&) {
    for (const auto& owned : *roles)
      stop_roles(owned.second);
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
        log::info("node " + st.config.name, "joined by coordinator " + to_string(peer));
        if (auto err = ensure_data_plane(self, settings)) return err;
        node_joined j;
        j.peer_id = st.plane->self();
        for (std::byte b : st.plane->address())
          j.address.push_back(static_cast<uint8_t>(b));
        return j;
      },
      [=](spawn_atom, const std::string& dir,
          actors::expert_shard_config& cfg) -> caf::result<actors::expert_shard_actor> {
        if (auto err = check_admitted(self, "a spawn")) return err;
        if (auto err = ensure_model(self, dir)) return err;
        if (auto err = refused(self, actors::check_spawn(self->state.ctx->config, cfg))) return err;
        const std::string name = cfg.name;
        return registered(self, actors::spawn_expert_shard(self->system(), self->state.ctx, cfg),
                          name);
      },
      [=](spawn_atom, const std::string& dir, actors::decode_worker_config& cfg,
          actors::shard_set& shards) -> caf::result<actors::decode_worker_actor> {
        if (auto err = check_admitted(self, "a spawn")) return err;
        if (auto err = ensure_model(self, dir)) return err;
        if (auto err = refused(self, actors::check_spawn(self->state.ctx->config, cfg, shards))) {
          return err;
        }
        const std::string name = cfg.name;
        return registered(
            self, actors::spawn_decode_worker(self->system(), self->state.ctx, cfg, shards), name);
      },
      [=](spawn_atom, const std::string& dir, actors::prefill_worker_config& cfg,
          actors::shard_set& shards) -> caf::result<actors::prefill_worker_actor> {
        if (auto err = check_admitted(self, "a spawn")) return err;
        if (auto err = ensure_model(self, dir)) return err;
        if (auto err = refused(self, actors::check_spawn(self->state.ctx->config, cfg, shards))) {
          return err;
        }
        const std::string name = cfg.name;
        return registered(
            self, actors::spawn_prefill_worker(self->system(), self->state.ctx, cfg, shards), name);
      },
      [=](spawn_atom, actors::kv_store_config& cfg) -> caf::result<actors::kv_store_actor> {
        if (auto err = check_admitted(self, "a spawn")) return err;
        const std::string name = cfg.name;
        return registered(self, actors::spawn_kv_store(self->system(), std::move(cfg)), name);
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
        return true;
      },
      [=](peer_down_atom, uint64_t peer, const std::string& why) {
        if (check_admitted(self, "a peer_down")) return;
        self->state.plane->peer_down(peer, why);
      },
      [=](actors::status_atom) {
        const auto& st = self->state;
        actors::role_status s;
        s.name = st.config.name;
        s.role = "node_agent";
        s.in_flight = st.spawned;
        s.detail =
            nlohmann::json{{"model", st.model_dir}, {"coordinators", st.admitted.size()}}.dump();
        return s;
      },
  };
}

}  // namespace

node_agent_actor spawn_node_agent(caf::actor_system& sys, node_agent_config config) {
  return sys.spawn(agent_behavior, std::move(config));
}

}  // namespace brigade::cluster
