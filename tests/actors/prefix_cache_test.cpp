// The prefill worker's prefix cache without actors: reuse, reference counts, eviction order,
// retention per scenario under a warped clock, and the blocks handed to the KV store.
#include "actors/prefix_cache.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <random>

#include "actors/retention_table.hpp"
#include "config/manifest.hpp"
#include "kvcache/hash_key.hpp"

using namespace brigade;
using actors::job_blocks;
using actors::job_prefix;

namespace {

constexpr int bt = 4;  // tokens per block

struct fixture {
  std::unique_ptr<gpu::backend> dev = gpu::make_cpu_backend();
  std::unique_ptr<gpu::kv_storage> kv;
  kvcache::block_pool pool;
  kvcache::manual_clock clk{1'000'000'000};
  kvcache::retention policy = actors::retention_table(brigade::config::kv_cache_policy{}.scenarios);
  kvcache::block_hasher hasher{kvcache::random_hash_key()};
  actors::prefix_cache cache;

  explicit fixture(int blocks, size_t capacity = 0, bool demote = false)
      : kv(make_kv(*dev, blocks)),
        pool(blocks),
        cache(pool, *dev, *kv, hasher, config(blocks, capacity, demote), clk, policy) {}

  static std::unique_ptr<gpu::kv_storage> make_kv(gpu::backend& dev, int blocks) {
    gpu::kv_layout l;
    l.layers = 2;
    l.blocks = blocks;
    l.block_tokens = bt;
    l.kv_heads = 1;
    l.head_dim = 2;
    return dev.make_kv(l);
  }
  static actors::prefix_cache_config config(int blocks, size_t capacity, bool demote) {
    actors::prefix_cache_config c;
    c.block_tokens = bt;
    c.capacity_blocks = capacity == 0 ? static_cast<size_t>(blocks) : capacity;
    c.demote = demote;
    return c;
  }
};

// A job as the worker runs it: admit, "compute" the rest by writing recognisable KV, cache it.
struct job {
  explicit job(std::vector<int32_t> t = {}) : tokens(std::move(t)) {}
  std::vector<int32_t> tokens;
  job_prefix prefix;
  std::vector<int32_t> blocks;
  int computed = 0;
};

// Writes a value derived from (token position, first token) into each computed block, so a test
// can tell which job computed a block.
void compute(fixture& f, job& j) {
  const int total = static_cast<int>(j.tokens.size());
  for (int b = j.computed / bt; b * bt < total; ++b) {
    std::vector<float> k(bt * 2, static_cast<float>(j.tokens[0] * 1000 + b)), v = k;
    for (int l = 0; l < 2; ++l) {
      f.dev->write_kv_block(*f.kv, l, j.blocks[static_cast<size_t>(b)], k.data(), v.data());
    }
  }
  j.computed = total;
  f.cache.cache_computed(j.prefix, j.blocks, j.computed);
}

bool admit(fixture& f, job& j, kvcache::scenario_id scenario = kvcache::retention::chat) {
  f.cache.begin(j.tokens, "", scenario, j.prefix);
  f.cache.take_pooled(j.prefix, j.blocks);
  const int total = (static_cast<int>(j.tokens.size()) + bt - 1) / bt;
  if (!f.cache.allocate(total - static_cast<int>(j.blocks.size()), j.blocks)) return false;
  j.computed = j.prefix.first_computed() * bt;
  return true;
}

std::vector<int32_t> tokens(int first, int count) {
  std::vector<int32_t> t;
  for (int i = 0; i < count; ++i)
    t.push_back(first + i);
  return t;
}

status check(const fixture& f, const std::vector<const job*>& running) {
  std::vector<job_blocks> jobs;
  for (const job* j : running)
    jobs.push_back({&j->prefix, &j->blocks});
  return f.cache.check_invariants(jobs);
}

}  // namespace

TEST_CASE("a prompt reuses the cached full blocks of an earlier one and computes its last token",
          "[prefix_cache]") {
  fixture f(32);
  job a{tokens(1, 13)};  // 3 full blocks and one token
  REQUIRE(admit(f, a));
  CHECK(a.prefix.pool_blocks == 0);
  REQUIRE(f.cache.check_writable(a.blocks, 0, 13));
  compute(f, a);
  CHECK(f.cache.index().size() == 3);
  REQUIRE(check(f, {&a}));
  f.cache.finish(a.prefix, a.blocks, a.computed);
  REQUIRE(check(f, {}));
  CHECK(f.pool.used_blocks() == 3);  // what the cache keeps, nothing else

  job same{tokens(1, 13)};
  REQUIRE(admit(f, same));
  CHECK(same.prefix.pool_blocks == 3);
  CHECK(same.computed == 12);
  // The blocks it writes are its own; the cached ones are shared and never written.
  REQUIRE(f.cache.check_writable(same.blocks, same.computed, 1));
  CHECK_FALSE(f.cache.check_writable(same.blocks, 8, 1));

  // Exactly three blocks long: the third block holds the last token, so only two are reused.
  job exact{tokens(1, 12)};
  REQUIRE(admit(f, exact));
  CHECK(exact.prefix.pool_blocks == 2);
  job other{tokens(2, 13)};
  REQUIRE(admit(f, other));
  CHECK(other.prefix.pool_blocks == 0);
  REQUIRE(check(f, {&same, &exact, &other}));
  for (job* j : {&same, &exact, &other}) {
    compute(f, *j);
    f.cache.finish(j->prefix, j->blocks, j->computed);
  }
  REQUIRE(check(f, {}));
  CHECK(f.pool.used_blocks() == static_cast<int>(f.cache.index().size()));
}

TEST_CASE("two jobs computing the same block: the second reads the first one's copy",
          "[prefix_cache]") {
  fixture f(32);
  job a{tokens(1, 9)}, b{tokens(1, 9)};
  REQUIRE(admit(f, a));
  REQUIRE(admit(f, b));  // nothing cached yet: both compute everything
  compute(f, a);
  const auto a_blocks = a.blocks;
  compute(f, b);
  CHECK(b.blocks[0] == a_blocks[0]);
  CHECK(b.blocks[1] == a_blocks[1]);
  CHECK(b.blocks[2] != a_blocks[2]);  // the partial block stays private
  REQUIRE(check(f, {&a, &b}));
  f.cache.finish(a.prefix, a.blocks, a.computed);
  f.cache.finish(b.prefix, b.blocks, b.computed);
  REQUIRE(check(f, {}));
  CHECK(f.pool.used_blocks() == 2);
}

TEST_CASE("eviction takes the least recently released blocks, deepest first", "[prefix_cache]") {
  fixture f(8);
  job a{tokens(10, 9)}, b{tokens(20, 9)};  // two full blocks each
  for (job* j : {&a, &b}) {
    REQUIRE(admit(f, *j));
    compute(f, *j);
    f.cache.finish(j->prefix, j->blocks, j->computed);
  }
  std::vector<kvcache::block_hash> hashes;
  std::vector<uint8_t> stored;
  f.cache.take_events(hashes, stored);
  CHECK(stored == std::vector<uint8_t>{1, 1, 1, 1});
  const auto a_chain = f.hasher.chain(a.tokens.data(), a.tokens.size(), bt);
  const auto b_chain = f.hasher.chain(b.tokens.data(), b.tokens.size(), bt);
  // Using a again makes b the least recently used.
  job again{tokens(10, 9)};
  REQUIRE(admit(f, again));
  compute(f, again);
  f.cache.finish(again.prefix, again.blocks, again.computed);
  // 4 cached + 5 needed > 8: one block is evicted, b's deeper one first.
  job c{tokens(30, 20)};
  REQUIRE(admit(f, c));
  hashes.clear();
  stored.clear();
  f.cache.take_events(hashes, stored);
  REQUIRE(hashes.size() >= 1);
  CHECK(hashes[0] == b_chain[1]);
  CHECK(stored[0] == 0);
  // Everything pinned: a job needing more than the free and unpinned blocks waits.
  job d{tokens(40, 30)};
  f.cache.begin(d.tokens, "", 0, d.prefix);
  std::vector<int32_t> none;
  CHECK_FALSE(f.cache.allocate(8, none));
  CHECK(none.empty());
  REQUIRE(check(f, {&c}));
  f.cache.finish(c.prefix, c.blocks, c.computed);
  REQUIRE(check(f, {}));
}

TEST_CASE("retention: chat blocks expire after 7 days, agent blocks after 3", "[prefix_cache]") {
  using namespace std::chrono_literals;
  fixture f(32);
  job chat{tokens(1, 9)}, agent{tokens(2, 9)};
  REQUIRE(admit(f, chat, kvcache::retention::chat));
  REQUIRE(admit(f, agent, kvcache::retention::agent));
  for (job* j : {&chat, &agent}) {
    compute(f, *j);
    f.cache.finish(j->prefix, j->blocks, j->computed);
  }
  auto hits = [&](int first) {
    job probe{tokens(first, 9)};
    f.cache.begin(probe.tokens, "", 0, probe.prefix);
    return std::min(f.cache.index().match(probe.prefix.chain), probe.prefix.reusable);
  };
  f.clk.advance(3 * 24h - 1s);
  CHECK(hits(1) == 2);
  CHECK(hits(2) == 2);
  f.clk.advance(2s);
  CHECK(hits(1) == 2);
  CHECK(hits(2) == 0);  // agent: 3 days
  f.clk.advance(4 * 24h - 2s);
  CHECK(hits(1) == 2);
  f.clk.advance(2s);
  CHECK(hits(1) == 0);  // chat: 7 days
  f.cache.expire();
  CHECK(f.cache.index().size() == 0);
  CHECK(f.pool.used_blocks() == 0);
  REQUIRE(check(f, {}));
}

TEST_CASE("evicted blocks and blocks the pool cannot keep go to the KV store byte for byte",
          "[prefix_cache]") {
  fixture f(8, 2, true);  // the pool keeps at most 2 cached blocks
  job a{tokens(10, 17)};  // 4 full blocks
  REQUIRE(admit(f, a, kvcache::retention::agent));
  compute(f, a);
  // Caching blocks 0 and 1 filled the pool's budget; 2 and 3 could not be cached (the
  // index's entries are all pinned by this job) and leave when the job ends.
  CHECK(f.cache.index().size() == 2);
  f.cache.finish(a.prefix, a.blocks, a.computed);
  auto demoted = f.cache.take_demotions();
  REQUIRE(demoted.size() == 2);
  const auto chain = f.hasher.chain(a.tokens.data(), a.tokens.size(), bt);
  CHECK(demoted[0].hash == chain[2]);
  CHECK(demoted[1].hash == chain[3]);
  CHECK(demoted[0].scenario == kvcache::retention::agent);
  REQUIRE(demoted[0].bytes.size() == f.cache.block_bytes());
  float first = 0;
  std::memcpy(&first, demoted[1].bytes.data(), sizeof first);
  CHECK(first == 10 * 1000 + 3);
  // A new prompt evicts the cached ones, which are copied out too.
  job b{tokens(50, 17)};
  REQUIRE(admit(f, b));
  compute(f, b);
  f.cache.finish(b.prefix, b.blocks, b.computed);
  demoted = f.cache.take_demotions();
  REQUIRE(demoted.size() >= 2);
  CHECK(demoted[0].hash == chain[1]);  // deepest first
  CHECK(demoted[1].hash == chain[0]);
  REQUIRE(check(f, {}));

  // Fetched blocks written into a new job read back exactly.
  job c{tokens(10, 17)};
  f.cache.begin(c.tokens, "", 0, c.prefix);
  f.cache.take_pooled(c.prefix, c.blocks);
  REQUIRE(c.prefix.held == 0);
  REQUIRE(f.cache.allocate(5, c.blocks));
  std::vector<uint8_t> fetched;
  for (int i = 1; i >= 0; --i) {
    fetched.insert(fetched.end(), demoted[static_cast<size_t>(i)].bytes.begin(),
                   demoted[static_cast<size_t>(i)].bytes.end());
  }
  f.cache.adopt_fetched(c.prefix, c.blocks, fetched, 1, 1);
  CHECK(c.prefix.first_computed() == 2);
  std::vector<float> k(bt * 2), v(bt * 2);
  f.dev->read_kv_block(*f.kv, 1, c.blocks[1], k.data(), v.data());
  CHECK(k[0] == 10 * 1000 + 1);
  REQUIRE(check(f, {&c}));
  f.cache.finish(c.prefix, c.blocks, 8);
  REQUIRE(check(f, {}));
}

TEST_CASE("random jobs keep the reference counts exact and leak nothing", "[prefix_cache]") {
  const uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  fixture f(64, 40);
  std::vector<std::unique_ptr<job>> running;
  for (int round = 0; round < 2000; ++round) {
    const int action = static_cast<int>(rng() % 3);
    if (action == 0 && running.size() < 6) {
      // Prompts share prefixes drawn from a few families.
      auto j = std::make_unique<job>();
      const int family = static_cast<int>(rng() % 4);
      const int length = 1 + static_cast<int>(rng() % 30);
      for (int t = 0; t < length; ++t) {
        j->tokens.push_back(t < 12 ? family * 100 + t : static_cast<int>(rng() % 50));
      }
      if (admit(f, *j, static_cast<kvcache::scenario_id>(rng() % 2))) {
        REQUIRE(f.cache.check_writable(j->blocks, j->computed,
                                       static_cast<int>(j->tokens.size()) - j->computed));
        running.push_back(std::move(j));
      } else {
        f.cache.finish(j->prefix, j->blocks, 0);
      }
    } else if (action == 1 && !running.empty()) {
      compute(f, *running[rng() % running.size()]);
    } else if (!running.empty()) {
      const size_t i = rng() % running.size();
      f.cache.finish(running[i]->prefix, running[i]->blocks, running[i]->computed);
      running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
    }
    if (rng() % 50 == 0) f.clk.advance(std::chrono::hours(30));
    std::vector<const job*> views;
    for (const auto& j : running)
      views.push_back(j.get());
    REQUIRE(check(f, views));
  }
  for (auto& j : running)
    f.cache.finish(j->prefix, j->blocks, j->computed);
  REQUIRE(check(f, {}));
  CHECK(f.pool.used_blocks() == static_cast<int>(f.cache.index().size()));
  CHECK(f.cache.index().referenced() == 0);
}
