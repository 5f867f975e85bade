#include "deploy/coordinator.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <chrono>
#include <thread>

#include "cluster/join_secret.hpp"
#include "common/log.hpp"

namespace brigade::deploy {
namespace {

constexpr std::chrono::seconds request_timeout{30};

result<actors::node_agent_actor> connect(caf::actor_system& sys, const node_spec& n,
                                         int timeout_s) {
  const auto colon = n.address.rfind(':');
  const std::string host = n.address.substr(0, colon);
  const auto port = static_cast<uint16_t>(std::stoi(n.address.substr(colon + 1)));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  std::string last;
  while (true) {
    auto h = sys.middleman().remote_actor<actors::node_agent_actor>(host, port);
    if (h) return *h;
    last = sys.render(h.error());
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return error(errc::unavailable, "node '" + n.name + "' at " + n.address +
                                      " did not answer within " + std::to_string(timeout_s) +
                                      " s (" + last + "); is `brigade node --listen " + n.address +
                                      "` running?");
}

// Both sides prove the secret over each other's nonces; a node with another secret is refused.
result<joined_node> join(caf::actor_system& sys, const manifest& m, const node_spec& n,
                         const std::string& secret, int timeout_s) {
  auto agent = connect(sys, n, timeout_s);
  if (!agent) return agent.err();
  caf::scoped_actor self{sys};
  const std::string ours = cluster::random_nonce();
  std::optional<actors::node_hello> hello;
  std::string failure;
  self->request(agent.value(), request_timeout, actors::hello_atom_v, ours)
      .receive([&](actors::node_hello& h) { hello = std::move(h); },
               [&](caf::error& err) { failure = sys.render(err); });
  if (!hello) return error(errc::unavailable, "node '" + n.name + "': hello failed: " + failure);
  if (!cluster::proofs_equal(hello->proof,
                             cluster::join_proof(secret, "node", ours, hello->nonce))) {
    return error(errc::invalid_argument,
                 "node '" + n.name + "' at " + n.address +
                     " failed the join secret check: it was started with another secret; "
                     "refusing it");
  }
  std::optional<actors::node_joined> joined;
  self->request(agent.value(), request_timeout, actors::join_atom_v,
                cluster::join_proof(secret, "coordinator", hello->nonce, ours),
                actors::data_plane_settings{m.transport.tls, m.transport.net_devices})
      .receive([&](actors::node_joined& j) { joined = std::move(j); },
               [&](caf::error& err) { failure = sys.render(err); });
  if (!joined) {
    return error(errc::invalid_argument, "node '" + n.name + "' refused to join: " + failure);
  }
  log::info("coordinator", "node " + n.name + " joined (" + n.address + ")");
  return joined_node{n.name, agent.value(), joined->peer_id, joined->address};
}

}  // namespace

result<std::vector<joined_node>> join_nodes(caf::actor_system& sys, const manifest& m,
                                            int connect_timeout_s) {
  auto secret = cluster::read_join_secret(m.join_secret_file);
  if (!secret) return secret.err();
  std::vector<joined_node> out;
  std::vector<actors::peer_info> peers;
  for (const auto& n : m.nodes) {
    auto j = join(sys, m, n, secret.value(), connect_timeout_s);
    if (!j) return j.err();
    out.push_back(j.value());
  }
  // Every node learns every other node's data plane.
  for (const auto& j : out)
    peers.push_back({j.peer_id, j.name, j.agent->node(), j.address});
  caf::scoped_actor self{sys};
  for (const auto& j : out) {
    std::string failure;
    self->request(j.agent, request_timeout, actors::peers_atom_v, peers)
        .receive([](bool) {}, [&](caf::error& err) { failure = sys.render(err); });
    if (!failure.empty()) {
      return error(errc::unavailable, "node '" + j.name + "' cannot reach its peers: " + failure);
    }
  }
  return out;
}

}  // namespace brigade::deploy
