// Random interleavings of many in-flight requests against one prefix index, checked against a
// shadow model after every operation. A failure prints its seed; rerun just that seed with
// BRIGADE_TEST_SEED=<seed>.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <random>
#include <unordered_map>
#include <unordered_set>

#include "kvcache/prefix_index.hpp"
#include "tests/kvcache/index_helpers.hpp"

using namespace brigade::kvcache;
using brigade::errc;

namespace {

constexpr std::size_t max_in_flight = 24;

struct request {
  std::vector<block_hash> chain;
  scenario_id scenario = retention::chat;
  std::size_t held = 0;
  /// Set when the index was full of pinned blocks: the rest of the prompt stays private.
  bool cache_full = false;
  std::vector<std::int64_t> private_ids;
};

/// How often the rare paths ran, so that the test shows it exercised them.
struct path_counts {
  std::size_t evicted = 0;
  std::size_t expired = 0;
  std::size_t full = 0;
  std::size_t duplicates = 0;
  /// Checks that found the protected segment full, so that demotions to probation ran.
  std::size_t protected_full = 0;
};

/// The shadow model: what the index must contain, and who owns each physical block.
class stress_run {
 public:
  stress_run(std::uint64_t seed, path_counts& counts)
      : rng_(seed),
        index_(std::uniform_int_distribution<std::size_t>(4, 64)(rng_), clk_, policy_),
        counts_(counts),
        clock_moves_(seed % 2 == 0) {}

  void run(int steps) {
    for (int step = 0; step < steps; ++step) {
      INFO("step " << step);
      one_step();
      if (step % 64 == 0) check_all();
    }
    while (!in_flight_.empty())
      finish(0);
    check_all();
    REQUIRE(index_.referenced() == 0);
    REQUIRE(index_.evictable() == index_.size());
    std::vector<removed_block> removed;
    const std::size_t evicted = index_.evict(index_.size(), removed);
    REQUIRE(evicted == removed.size());
    on_removed(removed);
    REQUIRE(index_.size() == 0);
    // No leak: every physical block the requests allocated came back exactly once.
    REQUIRE(live_ids_.empty());
  }

 private:
  template <class T>
  T uniform(T lo, T hi) {
    return std::uniform_int_distribution<T>(lo, hi)(rng_);
  }

  void one_step() {
    const int action = uniform(0, 99);
    if (action < 25 && in_flight_.size() < max_in_flight) {
      start();
    } else if (action < 75 && !in_flight_.empty()) {
      advance(uniform<std::size_t>(0, in_flight_.size() - 1));
    } else if (action < 90 && !in_flight_.empty()) {
      finish(uniform<std::size_t>(0, in_flight_.size() - 1));
    } else if (action < 95) {
      // Runs whose clock stands still never expire anything, so stale expiry-heap items pile
      // up and the heap's compaction runs too.
      if (clock_moves_) clk_.advance(std::chrono::hours(uniform(0, 48)));
      std::vector<removed_block> removed;
      counts_.expired += index_.expire(removed);
      on_removed(removed);
    } else {
      std::vector<removed_block> removed;
      index_.evict(uniform<std::size_t>(0, 8), removed);
      on_removed(removed);
    }
  }

  void start() {
    // Tokens from a 3-letter alphabet, one token per block: prompts share prefixes often.
    std::vector<std::int32_t> tokens(uniform<std::size_t>(1, 10));
    for (auto& t : tokens)
      t = uniform(0, 2);
    request r;
    r.chain = testing::test_hasher().chain(tokens.data(), tokens.size(), 1);
    r.scenario = uniform(0, 1) ? retention::chat : retention::agent;
    const std::size_t hits = index_.match(r.chain);
    std::vector<std::int64_t> ids;
    REQUIRE(index_.acquire(r.chain, hits, r.scenario, ids));
    for (std::size_t i = 0; i < hits; ++i) {
      REQUIRE(cached_.at(r.chain[i]) == ids[i]);
      ++refs_[r.chain[i]];
    }
    r.held = hits;
    in_flight_.push_back(std::move(r));
  }

  void advance(std::size_t which) {
    request& r = in_flight_[which];
    if (r.held == r.chain.size() || r.cache_full) return;
    const std::int64_t id = next_id_++;
    live_ids_.insert(id);
    std::vector<removed_block> removed;
    auto outcome = index_.insert(r.chain, r.held, id, r.scenario, removed);
    counts_.evicted += removed.size();
    on_removed(removed);
    if (!outcome) {
      REQUIRE(outcome.err().code == errc::resource_exhausted);
      REQUIRE(index_.referenced() == index_.size());
      r.cache_full = true;
      ++counts_.full;
      r.private_ids.push_back(id);
      return;
    }
    const block_hash h = r.chain[r.held];
    if (outcome->inserted) {
      REQUIRE(cached_.count(h) == 0);
      cached_[h] = id;
    } else {
      REQUIRE(cached_.at(h) == outcome->block_id);
      free_id(id);  // an equal block was cached first: ours is a duplicate
      ++counts_.duplicates;
    }
    ++refs_[h];
    ++r.held;
  }

  void finish(std::size_t which) {
    request& r = in_flight_[which];
    REQUIRE(index_.release(r.chain, r.held));
    for (std::size_t i = 0; i < r.held; ++i) {
      int& n = refs_[r.chain[i]];
      REQUIRE(n > 0);
      if (--n == 0) refs_.erase(r.chain[i]);
    }
    for (std::int64_t id : r.private_ids)
      free_id(id);
    in_flight_.erase(in_flight_.begin() + static_cast<std::ptrdiff_t>(which));
  }

  void on_removed(const std::vector<removed_block>& removed) {
    for (const auto& r : removed) {
      // Nothing a running request holds may leave the cache.
      REQUIRE(refs_.count(r.hash) == 0);
      REQUIRE(cached_.at(r.hash) == r.block_id);
      cached_.erase(r.hash);
      free_id(r.block_id);
    }
  }

  void free_id(std::int64_t id) { REQUIRE(live_ids_.erase(id) == 1); }

  void check_all() {
    REQUIRE(index_.check_invariants());
    REQUIRE(index_.size() == cached_.size());
    REQUIRE(index_.size() <= index_.capacity());
    if (index_.protected_capacity() > 0 && index_.protected_size() == index_.protected_capacity()) {
      ++counts_.protected_full;
    }
    for (const auto& [hash, id] : cached_) {
      const auto e = index_.find(hash);
      REQUIRE(e.has_value());
      REQUIRE(e->block_id == id);
      const auto it = refs_.find(hash);
      REQUIRE(e->refcount == (it == refs_.end() ? 0 : it->second));
    }
  }

  std::mt19937_64 rng_;
  manual_clock clk_{0};
  retention policy_;
  prefix_index index_;
  std::vector<request> in_flight_;
  std::unordered_map<block_hash, std::int64_t> cached_;
  std::unordered_map<block_hash, int> refs_;
  std::unordered_set<std::int64_t> live_ids_;
  std::int64_t next_id_ = 0;
  path_counts& counts_;
  bool clock_moves_;
};

}  // namespace

TEST_CASE("random interleavings of concurrent requests keep the index sound",
          "[kvcache][prefix_index][stress]") {
  std::vector<std::uint64_t> seeds;
  if (const char* env = std::getenv("BRIGADE_TEST_SEED")) {
    seeds.push_back(std::strtoull(env, nullptr, 10));
  } else {
    for (std::uint64_t s = 1; s <= 40; ++s)
      seeds.push_back(s * 7919);
  }
  path_counts counts;
  for (std::uint64_t seed : seeds) {
    INFO("seed " << seed << " (rerun with BRIGADE_TEST_SEED=" << seed << ")");
    stress_run(seed, counts).run(4000);
  }
  if (seeds.size() > 1) {
    CHECK(counts.evicted > 100);
    CHECK(counts.expired > 100);
    CHECK(counts.full > 10);
    CHECK(counts.duplicates > 100);
    CHECK(counts.protected_full > 100);
  }
}
