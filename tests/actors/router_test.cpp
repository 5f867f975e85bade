// The router takes a request's tokens and failures only from the workers of its current attempt:
// anyone else's are dropped and counted, also while the request waits for its next attempt (when
// an update once made the router give back a sequence to decode worker -1). Stand-in workers record
// the jobs they get and send what the test tells them to, as themselves.
#include "actors/router.hpp"
#include "kvcache/hash_key.hpp"

#include <caf/all.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <thread>

#include "actors/collecting_sink.hpp"
#include "actors/message_types.hpp"
#include "actors/prefill_worker.hpp"

using namespace brigade;
using namespace brigade::actors;

namespace {

struct job_log {
  std::mutex mutex;
  std::vector<prefill_job> jobs;

  // The newest job, once there are `n`.
  prefill_job wait_for(size_t n) {
    for (int tries = 0; tries < 2000; ++tries) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (jobs.size() >= n) return jobs.back();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    FAIL("no prefill job " << n << " within 10 s");
    return {};
  }
};

// A worker that records prefill jobs and passes on to the router, as itself, the updates and
// failures the test hands it.
caf::behavior stand_in(caf::event_based_actor* self, std::shared_ptr<job_log> log,
                       router_actor router) {
  return {
      [log](prefill_job& job) {
        std::lock_guard<std::mutex> lock(log->mutex);
        log->jobs.push_back(job);
      },
      [self, router](std::vector<token_update>& updates) { self->send(router, updates); },
      [self, router](job_failed& f) { self->send(router, f); },
      [](cancel_atom, uint64_t, uint32_t) {},
  };
}

// A count from the router's status, once it reaches `at_least` (messages sent through the stand-ins
// may come after the test's own), or after 10 s.
int64_t router_count(caf::scoped_actor& self, const router_actor& router,
                     int64_t router_status::*key, int64_t at_least) {
  int64_t n = -1;
  for (int tries = 0; tries < 1000 && n < at_least; ++tries) {
    if (tries > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    self->request(router, std::chrono::seconds(10), status_atom_v)
        .receive([&](const router_status& s) { n = s.*key; },
                 [&](caf::error& err) { FAIL(to_string(err)); });
  }
  return n;
}

constexpr auto none = model::finish_reason::none;
constexpr auto length = model::finish_reason::length;

}  // namespace

TEST_CASE("a request's tokens count only from its current workers", "[actors][router]") {
  caf::actor_system_config cfg;
  cfg.set("logger.verbosity", caf::atom("quiet"));
  register_role_types(cfg);
  caf::actor_system sys{cfg};
  router_config rc;
  rc.retry_backoff = std::chrono::seconds(2);  // a long wait between attempts
  auto router = spawn_router(
      sys, rc, std::make_shared<const kvcache::block_hasher>(kvcache::random_hash_key()));
  auto log = std::make_shared<job_log>();
  auto prefill = sys.spawn(stand_in, log, router);
  auto decode = sys.spawn(stand_in, log, router);
  caf::anon_send(
      router, worker_atom_v,
      prefill_up{0, "prefill-0", caf::actor_cast<prefill_worker_actor>(prefill), "local"});
  caf::anon_send(
      router, worker_atom_v,
      decode_up{0, "decode-0", caf::actor_cast<decode_worker_actor>(decode), 8, "local"});

  caf::scoped_actor self{sys};
  auto sink = std::make_shared<testing::collecting_sink>();
  serve::generation_request req;
  req.id = 1;
  req.prompt = {3, 4, 5};
  req.max_tokens = 4;
  caf::anon_send(router, submit_atom_v, generation_job{req, sink});
  const prefill_job first = log->wait_for(1);
  CHECK(sink->accepted());

  // Tokens from an actor that is not the request's worker are dropped.
  token_update forged{first.request, first.attempt, 0, {9, 9}, none, 0, {}, {}};
  self->send(router, std::vector<token_update>{forged});
  CHECK(router_count(self, router, &router_status::foreign_messages, 1) == 1);
  CHECK(sink->tokens().empty());

  // The decode worker's count.
  token_update from_decode{first.request, first.attempt, 0, {7}, none, 0, {}, {}};
  caf::anon_send(decode, std::vector<token_update>{from_decode});
  REQUIRE(sink->wait_tokens(1, std::chrono::seconds(10)));

  // The prefill worker fails the attempt: the request waits out the backoff with no workers.
  caf::anon_send(prefill, job_failed{first.request, first.attempt, "test", true});
  REQUIRE(router_count(self, router, &router_status::redispatched, 1) == 1);
  // A failed attempt's number is retired at once, so the waiting request is at the next one:
  // updates naming it, from a stranger and from the old decode worker, come while it waits.
  token_update early{first.request, first.attempt + 1, 1, {8}, length, 0, {}, {}};
  self->send(router, std::vector<token_update>{early});
  caf::anon_send(decode, std::vector<token_update>{early});
  self->send(router, job_failed{first.request, first.attempt + 1, "forged", false});
  const prefill_job second = log->wait_for(2);
  CHECK(second.attempt > first.attempt + 1);
  CHECK(second.tokens == std::vector<int32_t>({3, 4, 5, 7}));
  CHECK(router_count(self, router, &router_status::foreign_messages, 4) == 4);
  CHECK_FALSE(sink->failed());

  // The new attempt's worker finishes the request; every token arrived once.
  token_update rest{second.request, second.attempt, 1, {8, 6, 5}, length, 0, {}, {}};
  caf::anon_send(decode, std::vector<token_update>{rest});
  REQUIRE(sink->wait(std::chrono::seconds(10)));
  CHECK_FALSE(sink->failed());
  CHECK(sink->tokens() == std::vector<int32_t>({7, 8, 6, 5}));
  CHECK(sink->terminal_calls() == 1);
  for (const auto& a : {caf::actor_cast<caf::actor>(router), prefill, decode})
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

TEST_CASE("refusals reach the request's sink, never a token after them", "[actors][router]") {
  caf::actor_system_config cfg;
  cfg.set("logger.verbosity", caf::atom("quiet"));
  register_role_types(cfg);
  caf::actor_system sys{cfg};
  router_config rc;
  rc.admission_queue = 2;
  rc.scenarios = {"chat"};
  auto router =
      spawn_router(sys, rc,
                   std::make_shared<const kvcache::block_hasher>(
                       kvcache::random_hash_key()));  // no workers: whatever is admitted waits
  auto submit = [&](int64_t id, const std::string& scenario) {
    serve::generation_request req;
    req.id = id;
    req.prompt = {3, 4, 5};
    req.scenario = scenario;
    auto sink = std::make_shared<testing::collecting_sink>();
    caf::anon_send(router, submit_atom_v, generation_job{req, sink});
    return sink;
  };
  auto unknown = submit(1, "nightly");
  REQUIRE(unknown->wait(std::chrono::seconds(10)));
  CHECK_FALSE(unknown->accepted());
  CHECK(unknown->err().code == errc::invalid_argument);
  CHECK_THAT(unknown->err().message, Catch::Contains("nightly"));

  auto waiting = submit(2, "chat");
  auto same_id = submit(2, "chat");
  auto second = submit(3, "chat");
  auto over = submit(4, "chat");
  REQUIRE(same_id->wait(std::chrono::seconds(10)));
  REQUIRE(over->wait(std::chrono::seconds(10)));
  CHECK(same_id->err().code == errc::invalid_argument);
  CHECK(over->err().code == errc::resource_exhausted);
  CHECK(waiting->accepted());
  CHECK(second->accepted());
  CHECK_FALSE(waiting->wait(std::chrono::seconds(0)));
  caf::anon_send(router, service_cancel{2});
  REQUIRE(waiting->wait(std::chrono::seconds(10)));
  CHECK(waiting->err().code == errc::cancelled);
  CHECK(waiting->terminal_calls() == 1);
  caf::anon_send_exit(router, caf::exit_reason::user_shutdown);
}
