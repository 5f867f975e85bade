// An expert shard's loader between migrations: experts new to the shard that no peer can give
// are read from the checkpoint, and before the first and after every expert that moved bytes the
// loader waits out the copy interval, so that a migration's work spreads over more steps.
#include <caf/all.hpp>

#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>

#include "actors/expert_shard.hpp"
#include "actors/message_types.hpp"
#include "actors/model_context.hpp"
#include "actors/small_model.hpp"
#include "kvcache/hash_key.hpp"

using namespace brigade;

namespace {

// Slots 0-1 of both layers hold experts 0-1 at first; the next epoch puts experts 2-4 into
// three more slots of layer 0, with no peer named to copy them from.
actors::shard_plan first_plan() {
  actors::shard_plan p;
  p.epoch = 0;
  for (int32_t layer = 0; layer < 2; ++layer) {
    for (int32_t slot = 0; slot < 2; ++slot)
      p.slots.push_back({layer, slot, slot});
  }
  return p;
}

actors::shard_plan next_plan() {
  actors::shard_plan p = first_plan();
  p.epoch = 1;
  for (int32_t expert = 2; expert <= 4; ++expert)
    p.slots.push_back({0, expert, expert});
  return p;
}

// A small model's context, and an actor system that knows brigade's messages.
struct shard_fixture {
  testing::small_model model;
  std::shared_ptr<const actors::model_context> ctx;
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;

  explicit shard_fixture(const std::string& name) : model(name, 9) {
    auto loaded = actors::model_context::load(model.dir.path(), kvcache::random_hash_key(), {});
    REQUIRE(loaded.ok());
    ctx = loaded.value();
    cfg.set("logger.verbosity", caf::atom("quiet"));
    actors::register_role_types(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
  }

  // A shard holding first_plan() that sends `sink` a load sample every 4 steps.
  actors::expert_shard_actor sampling_shard(const caf::actor& sink) {
    actors::expert_shard_config config;
    config.name = "expert_shard-0";
    config.plan = first_plan();
    config.sample_interval_steps = 4;
    config.load_sink = caf::actor_cast<actors::load_sink_actor>(sink);
    return actors::spawn_expert_shard(*sys, ctx, config);
  }
};

// A load sink that counts the samples it gets; asked, it says how many came before the question.
caf::behavior counting_sink() {
  auto samples = std::make_shared<int>(0);
  return {[samples](actors::load_sample&) { ++*samples; },
          [samples](actors::status_atom) { return *samples; }};
}

// Sends `shard` a request without rows: only its step number and caller matter here.
void send_step(caf::scoped_actor& self, const actors::expert_shard_actor& shard,
               const actors::model_context& ctx, uint64_t step, uint64_t caller) {
  actors::expert_request req;
  req.step = step;
  req.caller = caller;
  req.input.cols = ctx.config.hidden_size;
  self->request(shard, std::chrono::seconds(30), std::move(req))
      .receive([](actors::expert_reply&) {},
               [&](caf::error& err) { FAIL(self->system().render(err)); });
}

// The samples `sink` got; the shard sent them before it answered the last request, so they are in
// the sink's mailbox before this question.
int samples_sent(caf::scoped_actor& self, const caf::actor& sink) {
  int samples = -1;
  self->request(sink, std::chrono::seconds(30), actors::status_atom_v)
      .receive([&](int n) { samples = n; },
               [&](caf::error& err) { FAIL(self->system().render(err)); });
  return samples;
}

// Asks `shard` to prepare the next epoch as its supervisor `self` and returns how long until it
// was ready.
std::chrono::milliseconds prepare_time(caf::actor_system& sys, caf::scoped_actor& self,
                                       const actors::expert_shard_actor& shard) {
  const auto start = std::chrono::steady_clock::now();
  bool ready = false;
  self->request(shard, std::chrono::seconds(30), actors::prepare_atom_v, next_plan())
      .receive([&](bool ok) { ready = ok; }, [&](caf::error& err) { FAIL(sys.render(err)); });
  CHECK(ready);
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start);
}

}  // namespace

TEST_CASE("a shard's loader reads sourceless experts from the checkpoint, pausing between them",
          "[experts]") {
  shard_fixture f{"expert-loader"};
  caf::actor_system& sys = *f.sys;
  caf::scoped_actor self{sys};  // the shard's supervisor: it plans the shard's epochs
  actors::expert_shard_config config;
  config.name = "expert_shard-0";
  config.plan = first_plan();
  config.copy_interval_ms = GENERATE(0, 150);
  config.load_sink = caf::actor_cast<actors::load_sink_actor>(self);
  auto shard = actors::spawn_expert_shard(sys, f.ctx, config);
  const auto took = prepare_time(sys, self, shard);
  INFO("copy interval " << config.copy_interval_ms << " ms, ready after " << took.count() << " ms");
  // Three experts read, a pause before the first (the prepares of a migration go out to every
  // shard at once) and after each of the first two (the third's does not delay the epoch). Only a
  // lower bound: this machine's speed is no part of the claim.
  CHECK(took.count() >= 3 * config.copy_interval_ms);
  self->request(shard, std::chrono::seconds(30), actors::status_atom_v)
      .receive(
          [&](const actors::expert_shard_status& s) {
            CHECK(s.experts_received.from_checkpoint == 3);
            CHECK(s.experts_received.same_node == 0);
          },
          [&](caf::error& err) { FAIL(sys.render(err)); });
  caf::anon_send_exit(shard, caf::exit_reason::user_shutdown);
}

TEST_CASE("a step number far ahead costs a shard one load sample, not a flood", "[experts]") {
  shard_fixture f{"expert-steps"};
  caf::actor_system& sys = *f.sys;
  auto sink = sys.spawn(counting_sink);
  auto shard = f.sampling_shard(sink);
  caf::scoped_actor self{sys};
  // Steps 1 and 2, then a number from a broken or hostile peer, then on from it.
  for (uint64_t step : {uint64_t{1}, uint64_t{2}, uint64_t{1} << 62, (uint64_t{1} << 62) + 1})
    send_step(self, shard, *f.ctx, step, 7);
  // The jump counts one window (2 + 4 steps), where it used to count 2^60 of them.
  CHECK(samples_sent(self, sink) == 1);
  caf::anon_send_exit(shard, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
}

TEST_CASE("a shard counts the steps of each caller apart, also when they share a sender",
          "[experts]") {
  shard_fixture f{"expert-callers"};
  caf::actor_system& sys = *f.sys;
  auto sink = sys.spawn(counting_sink);
  auto shard = f.sampling_shard(sink);
  caf::scoped_actor self{sys};
  // Two workers on another node reach the shard through one data-plane actor: one sender. Their
  // steps interleave; counted together, each would hide the other's.
  for (uint64_t step = 1; step <= 8; ++step) {
    send_step(self, shard, *f.ctx, step, 1);
    send_step(self, shard, *f.ctx, step, 2);
  }
  CHECK(samples_sent(self, sink) == 4);  // 16 steps, 4 per window
  caf::anon_send_exit(shard, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
}
