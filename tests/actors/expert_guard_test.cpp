// Expert calls to shards of the worker's own process carry no timeout of their own; one guard
// timer per worker fails a layer that waited expert_timeout (a hung shard), and shards behind
// data-plane proxies keep their per-call timeouts (actors/expert_dispatch.hpp).
#include <caf/all.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "actors/expert_dispatch.hpp"
#include "actors/message_types.hpp"
#include "actors/remote_link.hpp"

using namespace brigade;
using namespace brigade::actors;
using clock_type = std::chrono::steady_clock;

namespace {

// What on_expert_guard asks of a worker: timers to itself, recorded instead of sent.
struct recording_self {
  std::vector<std::chrono::milliseconds> timers;
  template <class... Ts>
  void send(Ts&&...) {}
  template <class Duration, class Atom>
  void delayed_send(recording_self*, Duration d, Atom) {
    timers.push_back(std::chrono::duration_cast<std::chrono::milliseconds>(d));
  }
};

// A link whose proxies are other actors for the shards it is told are remote.
class test_link final : public remote_link {
 public:
  test_link(expert_shard_actor remote, expert_shard_actor proxy)
      : remote_(std::move(remote)), proxy_(std::move(proxy)) {}
  expert_shard_actor local_view(const expert_shard_actor& shard) override {
    return shard == remote_ ? proxy_ : shard;
  }
  decode_worker_actor local_view(const decode_worker_actor& worker) override { return worker; }

 private:
  expert_shard_actor remote_, proxy_;
};

caf::behavior idle() {
  return {[](int) {}};
}

// Four idle actors standing in for expert shards, in an actor system of their own.
struct four_shards {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::vector<expert_shard_actor> actors;

  four_shards() {
    cfg.set("logger.verbosity", caf::atom("quiet"));
    register_role_types(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    for (int i = 0; i < 4; ++i)
      actors.push_back(caf::actor_cast<expert_shard_actor>(sys->spawn(idle)));
  }
  ~four_shards() {
    for (auto& a : actors)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  }
};

}  // namespace

TEST_CASE("the expert guard fails a layer that waited expert_timeout, else comes back when due",
          "[expert_guard]") {
  recording_self self;
  expert_client c;
  std::vector<std::string> failures;
  // A layer out for 5 s: not hung yet; the guard comes back when it would be (25 s on).
  c.guard_armed = true;
  c.waiting = open_layer{clock_type::now() - std::chrono::seconds(5),
                         [&](const std::string& why) { failures.push_back(why); }};
  on_expert_guard(&self, c);
  CHECK(failures.empty());
  CHECK(c.guard_armed);
  REQUIRE(self.timers.size() == 1);
  CHECK(self.timers[0] > std::chrono::seconds(24));
  CHECK(self.timers[0] <= std::chrono::seconds(25));
  // The same layer, expert_timeout after it went out: failed once, naming the wait; no new timer.
  c.waiting->sent = clock_type::now() - expert_timeout - std::chrono::milliseconds(1);
  on_expert_guard(&self, c);
  REQUIRE(failures.size() == 1);
  CHECK_THAT(failures[0], Catch::Contains("no answer within 30 s"));
  CHECK_FALSE(c.waiting.has_value());
  CHECK_FALSE(c.guard_armed);
  CHECK(self.timers.size() == 1);
  // Nothing waiting (the layer was answered): the guard stops until the next layer arms it.
  on_expert_guard(&self, c);
  CHECK(failures.size() == 1);
  CHECK_FALSE(c.guard_armed);
  CHECK(self.timers.size() == 1);
}

TEST_CASE("shards behind a data-plane proxy are not in process; all are without a link",
          "[expert_guard]") {
  four_shards shards;
  const std::vector<expert_shard_actor>& actors = shards.actors;
  shard_set set;
  set.shards = {actors[0], actors[1], actors[2]};
  {
    shard_set alone = set;
    CHECK(localize(alone) == std::vector<bool>{true, true, true});
    CHECK(alone.shards == set.shards);
  }
  test_link link(actors[1], actors[3]);
  remote_link::install(&link);
  shard_set linked = set;
  const std::vector<bool> in_process = localize(linked);
  remote_link::install(nullptr);
  CHECK(in_process == std::vector<bool>{true, false, true});
  CHECK(linked.shards[1] == actors[3]);  // the proxy, which keeps per-call timeouts
  CHECK(linked.shards[0] == actors[0]);
}

TEST_CASE("a failed call localizes the supervisor's shard set again once the peer is known",
          "[expert_guard]") {
  four_shards shards;
  const std::vector<expert_shard_actor>& actors = shards.actors;
  shard_set set;
  set.shards = {actors[0], actors[1], actors[2]};
  set.version = 7;
  recording_self self;
  expert_client c;
  // Adopted while this node knew no peer for shard 1's node: its raw handle stays.
  adopt_shards(&self, c, set);
  CHECK(c.shards.shards == set.shards);
  CHECK_FALSE(relocalize(c));  // still nothing known: nothing to resend with
  // The peer is known now: the next failed call finds the proxy, once.
  test_link link(actors[1], actors[3]);
  remote_link::install(&link);
  CHECK(relocalize(c));
  CHECK(c.shards.shards[1] == actors[3]);
  CHECK(c.shards.shards[0] == actors[0]);
  CHECK(c.in_process == std::vector<bool>{true, false, true});
  CHECK(c.shards.version == 7);
  CHECK_FALSE(relocalize(c));
  // A set the worker holds that is not the one last sent is left alone.
  c.shards.version = 8;
  CHECK_FALSE(relocalize(c));
  remote_link::install(nullptr);
}
