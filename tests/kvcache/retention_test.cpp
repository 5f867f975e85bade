#include "kvcache/retention.hpp"

#include <catch2/catch.hpp>
#include <chrono>

#include "kvcache/prefix_index.hpp"
#include "tests/kvcache/index_helpers.hpp"

using namespace brigade::kvcache;
using namespace brigade::kvcache::testing;
using namespace std::chrono_literals;
using brigade::errc;

namespace {

constexpr auto day = std::chrono::hours(24);
constexpr time_ns start_ns = 1'700'000'000'000'000'000;

struct fixture {
  manual_clock clk{start_ns};
  retention policy;
  prefix_index index{100, clk, policy};
  std::int64_t next_id = 0;
  std::vector<removed_block> removed;

  void warp_to(std::chrono::nanoseconds since_start) { clk.set(start_ns + since_start.count()); }
};

}  // namespace

TEST_CASE("scenarios: chat and agent by default, others from configuration",
          "[kvcache][retention]") {
  retention r;
  CHECK(*r.find("chat") == retention::chat);
  CHECK(*r.find("agent") == retention::agent);
  CHECK(r.period_ns(retention::chat) == to_ns(7 * day));
  CHECK(r.period_ns(retention::agent) == to_ns(3 * day));
  auto unknown = r.find("batch");
  CHECK(unknown.err().code == errc::invalid_argument);
  CHECK(unknown.err().message.find("chat, agent") != std::string::npos);
  REQUIRE(r.set("batch", std::chrono::hours(12)));
  CHECK(r.period_ns(*r.find("batch")) == to_ns(12h));
  REQUIRE(r.set("chat", std::chrono::hours(48)));
  CHECK(r.period_ns(retention::chat) == to_ns(48h));
  CHECK(r.size() == 3);
  CHECK_FALSE(r.set("", 1s));
  CHECK_FALSE(r.set("Bad Name", 1s));
  CHECK_FALSE(r.set("zero", 0s));
}

TEST_CASE("chat blocks expire 7 days after their last use", "[kvcache][retention]") {
  fixture f;
  const auto a = chain_of({1, 2, 3});
  serve(f.index, a, f.next_id, f.removed, retention::chat);
  f.warp_to(7 * day - 1ns);
  CHECK(f.index.expire(f.removed) == 0);
  CHECK(f.index.match(a) == 3);
  f.warp_to(7 * day);
  // Expired blocks are already invisible to lookups before the sweep removes them.
  CHECK(f.index.match(a) == 0);
  CHECK(f.index.expire(f.removed) == 3);
  CHECK(hashes_of(f.removed) == std::vector<block_hash>{a[2], a[1], a[0]});
  CHECK(f.index.size() == 0);
}

TEST_CASE("agent blocks expire 3 days after their last use", "[kvcache][retention]") {
  fixture f;
  const auto a = chain_of({1, 2});
  serve(f.index, a, f.next_id, f.removed, retention::agent);
  f.warp_to(3 * day - 1ns);
  CHECK(f.index.expire(f.removed) == 0);
  CHECK(f.index.match(a) == 2);
  f.warp_to(3 * day);
  CHECK(f.index.match(a) == 0);
  CHECK(f.index.expire(f.removed) == 2);
}

TEST_CASE("a use restarts the retention period", "[kvcache][retention]") {
  fixture f;
  const auto a = chain_of({1, 2});
  serve(f.index, a, f.next_id, f.removed, retention::agent);
  f.warp_to(2 * day);
  CHECK(serve(f.index, a, f.next_id, f.removed, retention::agent) == 2);
  f.warp_to(5 * day - 1ns);
  CHECK(f.index.expire(f.removed) == 0);
  f.warp_to(5 * day);
  CHECK(f.index.expire(f.removed) == 2);
}

TEST_CASE("a block shared by scenarios keeps the longest retention", "[kvcache][retention]") {
  fixture f;
  const auto shared = chain_of({1, 2});
  const auto agent_only = chain_of({1, 2, 3});
  serve(f.index, shared, f.next_id, f.removed, retention::chat);
  f.warp_to(1 * day);
  // The agent use would expire at day 4; chat's day 7 wins for the shared blocks.
  serve(f.index, agent_only, f.next_id, f.removed, retention::agent);
  CHECK(f.index.find(shared[0])->scenario == retention::chat);
  f.warp_to(4 * day);
  CHECK(f.index.expire(f.removed) == 1);
  CHECK(hashes_of(f.removed) == std::vector<block_hash>{agent_only[2]});
  f.warp_to(7 * day - 1ns);
  CHECK(f.index.expire(f.removed) == 0);
  f.warp_to(7 * day);
  CHECK(f.index.expire(f.removed) == 2);

  // The other way round: an agent block used by chat later lives 7 days from that use.
  fixture g;
  serve(g.index, shared, g.next_id, g.removed, retention::agent);
  g.warp_to(1 * day);
  serve(g.index, shared, g.next_id, g.removed, retention::chat);
  CHECK(g.index.find(shared[1])->scenario == retention::chat);
  g.warp_to(8 * day - 1ns);
  CHECK(g.index.expire(g.removed) == 0);
  g.warp_to(8 * day);
  CHECK(g.index.expire(g.removed) == 2);
}

TEST_CASE("a block in use outlives its expiry until released", "[kvcache][retention]") {
  fixture f;
  const auto a = chain_of({1, 2});
  std::vector<std::int64_t> ids;
  serve(f.index, a, f.next_id, f.removed, retention::agent);
  REQUIRE(f.index.acquire(a, 2, retention::agent, ids));
  f.warp_to(10 * day);
  CHECK(f.index.expire(f.removed) == 0);
  CHECK(f.index.size() == 2);
  REQUIRE(f.index.release(a, 2));
  // The acquire at day 0 was its last use: it is long expired once nobody reads it.
  CHECK(f.index.expire(f.removed) == 2);
  REQUIRE(f.index.check_invariants());
}

TEST_CASE("a configured scenario expires on its own period", "[kvcache][retention]") {
  manual_clock clk(start_ns);
  retention policy;
  REQUIRE(policy.set("batch", std::chrono::hours(1)));
  const scenario_id batch = *policy.find("batch");
  prefix_index index(10, clk, policy);
  std::int64_t next_id = 0;
  std::vector<removed_block> removed;
  serve(index, chain_of({1}), next_id, removed, batch);
  clk.set(start_ns + to_ns(1h) - 1);
  CHECK(index.expire(removed) == 0);
  clk.advance(1ns);
  CHECK(index.expire(removed) == 1);
}
