// The node agent refuses a coordinator that cannot prove the join secret, and spawns nothing
// for it. Two actor systems in one process stand for the node and the rogue coordinator.
#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <catch2/catch.hpp>
#include <optional>

#include "cluster/join_secret.hpp"
#include "cluster/node_agent.hpp"
#include "config/middleman_config.hpp"
#include "deploy/message_types.hpp"

using namespace brigade;

namespace {

struct system_with_middleman {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  system_with_middleman() {
    cfg.set("logger.verbosity", caf::atom("quiet"));
    deploy::register_message_types(cfg);
    config::configure_middleman(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
  }
};

const std::string secret = "the-cluster-secret-0123456789";

// A node agent published on loopback and a rogue process connected to it that does not know the
// secret: two actor systems in this process.
struct node_and_rogue {
  system_with_middleman node, rogue;
  cluster::node_agent_actor agent;
  std::optional<cluster::node_agent_actor> remote;

  node_and_rogue() {
    agent = cluster::spawn_node_agent(*node.sys, {"n1", secret, nullptr});
    auto port = node.sys->middleman().publish(agent, 0, "127.0.0.1");
    REQUIRE(port);
    auto connected =
        rogue.sys->middleman().remote_actor<cluster::node_agent_actor>("127.0.0.1", *port);
    REQUIRE(connected);
    remote = *connected;
  }
  ~node_and_rogue() { caf::anon_send_exit(agent, caf::exit_reason::user_shutdown); }
};

}  // namespace

TEST_CASE("a coordinator with the wrong proof is refused and gets nothing spawned", "[cluster]") {
  node_and_rogue n;
  auto& rogue = n.rogue;
  auto& remote = n.remote;
  caf::scoped_actor self{*rogue.sys};
  const auto timeout = std::chrono::seconds(10);

  // Without hello/join, a spawn is refused.
  bool spawned = false;
  std::string refusal;
  actors::expert_shard_config cfg;
  cfg.name = "expert_shard-0";
  actors::role_spec spec;
  spec.config = cfg;
  self->request(*remote, timeout, actors::spawn_atom_v, std::string("/nonexistent"), spec)
      .receive([&](caf::actor&) { spawned = true; },
               [&](caf::error& err) { refusal = rogue.sys->render(err); });
  CHECK_FALSE(spawned);
  CHECK_THAT(refusal, Catch::Contains("join secret"));

  // The node proves the secret; a rogue that does not know it sends a wrong proof back.
  std::optional<cluster::node_hello> hello;
  const std::string nonce = cluster::random_nonce();
  self->request(*remote, timeout, actors::hello_atom_v, nonce)
      .receive([&](cluster::node_hello& h) { hello = h; }, [&](caf::error&) {});
  REQUIRE(hello);
  CHECK(cluster::proofs_equal(hello->proof,
                              cluster::join_proof(secret, "node", nonce, hello->nonce)));
  bool joined = false;
  self->request(
          *remote, timeout, actors::join_atom_v,
          cluster::join_proof("not-the-secret-0123456789", "coordinator", hello->nonce, nonce),
          cluster::data_plane_settings{"tcp", "lo"})
      .receive([&](cluster::node_joined&) { joined = true; }, [&](caf::error&) {});
  CHECK_FALSE(joined);

  // Still nothing may be spawned.
  refusal.clear();
  self->request(*remote, timeout, actors::spawn_atom_v, std::string("/nonexistent"), spec)
      .receive([&](caf::actor&) { spawned = true; },
               [&](caf::error& err) { refusal = rogue.sys->render(err); });
  CHECK_FALSE(spawned);
  CHECK_THAT(refusal, Catch::Contains("join secret"));
}

TEST_CASE("join secrets: files, proofs", "[cluster]") {
  CHECK_FALSE(cluster::read_join_secret("/nonexistent/secret").ok());
  const auto a = cluster::join_proof(secret, "node", "x", "y");
  CHECK(cluster::proofs_equal(a, cluster::join_proof(secret, "node", "x", "y")));
  CHECK_FALSE(cluster::proofs_equal(a, cluster::join_proof(secret, "coordinator", "x", "y")));
  CHECK_FALSE(cluster::proofs_equal(a, cluster::join_proof(secret, "node", "y", "x")));
  CHECK(cluster::random_nonce() != cluster::random_nonce());
}

TEST_CASE("an outsized hello costs the node nothing", "[cluster]") {
  // (A layout a peer sends is checked as it is read, before any handler: spawn_checks_test.)
  node_and_rogue n;
  auto& rogue = n.rogue;
  auto& remote = n.remote;
  caf::scoped_actor self{*rogue.sys};
  // A hello must carry a nonce of the coordinators' size: the node keeps it until the join.
  std::string hello_refusal;
  self->request(*remote, std::chrono::seconds(10), actors::hello_atom_v, std::string(1 << 20, 'x'))
      .receive([&](cluster::node_hello&) {},
               [&](caf::error& err) { hello_refusal = rogue.sys->render(err); });
  CHECK_THAT(hello_refusal, Catch::Contains("nonce of 32 characters"));
  // The node is still there and answers.
  std::optional<cluster::node_hello> hello;
  self->request(*remote, std::chrono::seconds(10), actors::hello_atom_v, cluster::random_nonce())
      .receive([&](cluster::node_hello& h) { hello = h; }, [&](caf::error&) {});
  REQUIRE(hello);
  CHECK(hello->name == "n1");
}

TEST_CASE("the roles a coordinator spawned stop when its supervisor goes", "[cluster]") {
  // Left running, a crashed coordinator's roles held the node's memory and threads for good,
  // and kept `brigade node` from stopping.
  node_and_rogue n;
  auto& coordinator = n.rogue;
  auto& remote = n.remote;
  caf::scoped_actor self{*coordinator.sys};
  const auto timeout = std::chrono::seconds(10);

  std::optional<cluster::node_hello> hello;
  const std::string nonce = cluster::random_nonce();
  self->request(*remote, timeout, actors::hello_atom_v, nonce)
      .receive([&](cluster::node_hello& h) { hello = h; }, [&](caf::error&) {});
  REQUIRE(hello);
  bool joined = false;
  std::string join_failure;
  self->request(*remote, timeout, actors::join_atom_v,
                cluster::join_proof(secret, "coordinator", hello->nonce, nonce),
                cluster::data_plane_settings{"tcp", "lo"})
      .receive([&](cluster::node_joined&) { joined = true; },
               [&](caf::error& err) { join_failure = coordinator.sys->render(err); });
  INFO("join: " << join_failure);
  REQUIRE(joined);

  // A stand-in supervisor spawns a KV store on the node and hands its handle back.
  actors::kv_store_config cfg;
  cfg.name = "kv_store-0";
  cfg.model_id = "m";
  cfg.layers = 1;
  cfg.kv_heads = 1;
  cfg.head_dim = 8;
  cfg.host_bytes = 1 << 20;
  cfg.scenarios = {{"chat", 3600}, {"agent", 3600}};
  auto agent = *remote;
  caf::actor me = caf::actor_cast<caf::actor>(self);
  actors::role_spec spec;
  spec.config = cfg;
  auto supervisor = coordinator.sys->spawn([=](caf::event_based_actor* s) -> caf::behavior {
    s->request(agent, timeout, actors::spawn_atom_v, std::string("/unused"), spec)
        .then(
            [=](caf::actor& store) { s->send(me, caf::actor_cast<actors::kv_store_actor>(store)); },
            [=](caf::error& err) { s->send(me, err); });
    return {[](int) {}};
  });
  std::optional<actors::kv_store_actor> store;
  std::string spawn_failure;
  self->receive([&](actors::kv_store_actor& h) { store = h; },
                [&](caf::error& err) { spawn_failure = coordinator.sys->render(err); },
                caf::after(timeout) >> [&] { spawn_failure = "no answer"; });
  INFO("spawn: " << spawn_failure);
  REQUIRE(store);

  self->monitor(*store);
  caf::anon_send_exit(supervisor, caf::exit_reason::kill);
  bool stopped = false;
  self->receive(
      [&](caf::down_msg& dm) { stopped = dm.source == caf::actor_cast<caf::actor_addr>(*store); },
      caf::after(timeout) >> [] {});
  CHECK(stopped);
}
