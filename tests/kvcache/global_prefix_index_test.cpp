#include "kvcache/global_prefix_index.hpp"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <memory>
#include <random>

#include "kvcache/prefix_index.hpp"
#include "tests/kvcache/index_helpers.hpp"

using namespace brigade::kvcache;
using namespace brigade::kvcache::testing;
using brigade::errc;

TEST_CASE("the global index counts each worker's leading blocks", "[kvcache][global_index]") {
  global_prefix_index g(3);
  const auto a = chain_of({1, 2, 3, 4});
  REQUIRE(g.apply(blocks_stored{0, {a[0], a[1], a[2], a[3]}}));
  REQUIRE(g.apply(blocks_stored{1, {a[0], a[1]}}));
  REQUIRE(g.apply(blocks_stored{2, {a[1], a[2]}}));  // no a[0]: nothing leads
  std::vector<std::size_t> leading;
  g.match(a, leading);
  CHECK(leading == std::vector<std::size_t>{4, 2, 0});
  REQUIRE(g.apply(blocks_removed{0, {a[3], a[2]}}));
  g.match(a, leading);
  CHECK(leading == std::vector<std::size_t>{2, 2, 0});
  CHECK(g.blocks_on(0) == 2);
  CHECK(g.distinct_blocks() == 3);
  REQUIRE(g.apply(cache_cleared{1}));
  g.match(a, leading);
  CHECK(leading == std::vector<std::size_t>{2, 0, 0});
  CHECK(g.blocks_on(1) == 0);
  CHECK_FALSE(g.holds(1, a[0]));
}

TEST_CASE("inconsistent events are reported and the consistent rest applies",
          "[kvcache][global_index]") {
  global_prefix_index g(2);
  const auto a = chain_of({1, 2});
  REQUIRE(g.apply(blocks_stored{0, {a[0]}}));
  auto dup = g.apply(blocks_stored{0, {a[0], a[1]}});
  CHECK(dup.err().message.find("already held") != std::string::npos);
  CHECK(g.blocks_on(0) == 2);
  auto lost = g.apply(blocks_removed{1, {a[0]}});
  CHECK(lost.err().message.find("not known") != std::string::npos);
  CHECK(g.holds(0, a[0]));
  auto stranger = g.apply(blocks_stored{5, {a[0]}});
  CHECK(stranger.err().code == errc::invalid_argument);
  CHECK(g.distinct_blocks() == 2);
}

TEST_CASE("the global index agrees with every worker's own index under random traffic",
          "[kvcache][global_index]") {
  std::uint64_t seed = 4242;
  if (const char* env = std::getenv("BRIGADE_TEST_SEED")) seed = std::strtoull(env, nullptr, 10);
  INFO("seed " << seed << " (rerun with BRIGADE_TEST_SEED=" << seed << ")");
  std::mt19937_64 rng(seed);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  constexpr std::size_t workers = 5;
  manual_clock clk(0);
  retention policy;
  std::vector<std::unique_ptr<prefix_index>> local;
  for (std::size_t w = 0; w < workers; ++w) {
    local.push_back(std::make_unique<prefix_index>(8 + 8 * w, clk, policy));
  }
  global_prefix_index global(workers);
  std::int64_t next_id = 0;
  auto random_chain = [&] {
    std::vector<std::int32_t> tokens(static_cast<std::size_t>(uniform(1, 9)));
    for (auto& t : tokens)
      t = uniform(0, 2);
    return testing::test_hasher().chain(tokens.data(), tokens.size(), 1);
  };
  auto publish = [&](worker_id w, const std::vector<removed_block>& removed,
                     const std::vector<block_hash>& stored) {
    blocks_removed r{w, hashes_of(removed)};
    if (!r.hashes.empty()) REQUIRE(global.apply(r));
    if (!stored.empty()) REQUIRE(global.apply(blocks_stored{w, stored}));
  };
  for (int step = 0; step < 20000; ++step) {
    INFO("step " << step);
    const auto w = static_cast<worker_id>(uniform(0, workers - 1));
    std::vector<removed_block> removed;
    std::vector<block_hash> stored;
    if (uniform(0, 99) < 3) {
      clk.advance(std::chrono::hours(uniform(1, 72)));
      for (worker_id v = 0; v < workers; ++v) {
        removed.clear();
        local[v]->expire(removed);
        publish(v, removed, {});
      }
      continue;
    }
    // One request on worker w, with the events it produces, in order.
    const auto chain = random_chain();
    const std::size_t hits = local[w]->match(chain);
    std::vector<std::int64_t> ids;
    REQUIRE(local[w]->acquire(chain, hits, retention::chat, ids));
    std::size_t held = hits;
    for (std::size_t i = hits; i < chain.size(); ++i) {
      auto outcome = local[w]->insert(chain, i, next_id++, retention::chat, removed);
      if (!outcome) break;
      if (outcome->inserted) stored.push_back(chain[i]);
      ++held;
    }
    REQUIRE(local[w]->release(chain, held));
    publish(w, removed, stored);

    const auto probe = random_chain();
    std::vector<std::size_t> leading;
    global.match(probe, leading);
    for (worker_id v = 0; v < workers; ++v) {
      REQUIRE(leading[v] == local[v]->match(probe));
      REQUIRE(global.blocks_on(v) == local[v]->size());
    }
  }
}
