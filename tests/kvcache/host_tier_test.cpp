// The host-memory tier: round trips, LRU under a byte budget, retention per scenario, models kept
// apart, and readers racing an inserting thread.
#include <catch2/catch.hpp>
#include <thread>

#include "kvcache/host_tier.hpp"
#include "tier_helpers.hpp"

using namespace brigade::kvcache;
using namespace brigade::kvcache::testing;
using std::chrono::hours;

namespace {

std::vector<block_hash> hashes_of(const std::vector<tier_block>& blocks) {
  std::vector<block_hash> out;
  for (const auto& b : blocks)
    out.push_back(b.payload->hash());
  return out;
}

}  // namespace

TEST_CASE("host tier returns the block it stored, byte for byte", "[host_tier]") {
  manual_clock clk(test_epoch_ns);
  retention policy;
  const auto model = small_model();
  host_tier tier(16 * model.block_bytes(), clk, policy);
  std::vector<tier_block> evicted;
  tier.put(block_of(model, 7), retention::chat, evicted);
  CHECK(evicted.empty());
  CHECK(tier.contains({model.digest(), 7}));
  CHECK(intact(tier.get({model.digest(), 7}, retention::chat), model, 7));
  CHECK(tier.get({model.digest(), 8}, retention::chat) == nullptr);
  const tier_stats s = tier.stats();
  CHECK(s.blocks == 1);
  CHECK(s.bytes == model.block_bytes());
  CHECK(s.hits == 1);
  CHECK(s.misses == 1);
  CHECK(tier.erase({model.digest(), 7}));
  CHECK_FALSE(tier.contains({model.digest(), 7}));
  CHECK(tier.stats().bytes == 0);
  REQUIRE(tier.check_invariants().ok());
}

TEST_CASE("host tier evicts least recently used blocks to stay within its byte budget",
          "[host_tier]") {
  manual_clock clk(test_epoch_ns);
  retention policy;
  const auto model = small_model();
  host_tier tier(3 * model.block_bytes() + 100, clk, policy);
  std::vector<tier_block> evicted;
  for (block_hash h : {1, 2, 3}) {
    tier.put(block_of(model, h), retention::chat, evicted);
    clk.advance(std::chrono::seconds(1));
  }
  REQUIRE(evicted.empty());
  // Using block 1 makes block 2 the least recently used.
  REQUIRE(tier.get({model.digest(), 1}, retention::chat) != nullptr);
  clk.advance(std::chrono::seconds(1));
  tier.put(block_of(model, 4), retention::chat, evicted);
  CHECK(hashes_of(evicted) == std::vector<block_hash>{2});
  REQUIRE(evicted[0].last_use_ns == test_epoch_ns + to_ns(std::chrono::seconds(1)));
  tier.put(block_of(model, 5), retention::chat, evicted);
  CHECK(hashes_of(evicted) == std::vector<block_hash>{2, 3});
  CHECK(tier.stats().evictions == 2);
  CHECK(tier.stats().bytes == 3 * model.block_bytes());
  for (block_hash h : {1, 4, 5})
    CHECK(tier.contains({model.digest(), h}));
  REQUIRE(tier.check_invariants().ok());
}

TEST_CASE("host tier hands a block larger than its budget straight back for demotion",
          "[host_tier]") {
  manual_clock clk(test_epoch_ns);
  retention policy;
  const auto model = small_model();
  host_tier tier(model.block_bytes() - 1, clk, policy);
  std::vector<tier_block> evicted;
  tier.put(block_of(model, 1), retention::agent, evicted);
  REQUIRE(evicted.size() == 1);
  CHECK(evicted[0].scenario == retention::agent);
  CHECK(tier.stats().blocks == 0);
}

TEST_CASE("host tier expires a block at its last use plus its longest scenario's retention",
          "[host_tier]") {
  manual_clock clk(test_epoch_ns);
  retention policy;  // chat 7 days, agent 3 days
  const auto model = small_model();
  host_tier tier(16 * model.block_bytes(), clk, policy);
  std::vector<tier_block> evicted;
  tier.put(block_of(model, 1), retention::agent, evicted);
  tier.put(block_of(model, 2), retention::chat, evicted);
  tier.put(block_of(model, 3), retention::agent, evicted);
  clk.advance(hours(24));
  // A chat use lengthens block 3's retention to 7 days from now.
  REQUIRE(tier.get({model.digest(), 3}, retention::chat) != nullptr);
  CHECK(tier.stats().blocks_by_scenario == std::vector<std::uint64_t>{2, 1});
  clk.advance(hours(48));  // day 3: block 1 (agent, used on day 0) expires.
  CHECK_FALSE(tier.contains({model.digest(), 1}));
  CHECK(tier.contains({model.digest(), 2}));
  std::vector<tier_block> expired;
  CHECK(tier.expire(expired) == 1);
  CHECK(hashes_of(expired) == std::vector<block_hash>{1});
  clk.advance(hours(4 * 24));  // day 7: block 2 (chat, day 0) expires; block 3 lives to day 8.
  CHECK(tier.get({model.digest(), 2}, retention::chat) == nullptr);
  CHECK(tier.contains({model.digest(), 3}));
  clk.advance(hours(24));
  CHECK_FALSE(tier.contains({model.digest(), 3}));
  CHECK(tier.stats().expirations == 2);
  REQUIRE(tier.check_invariants().ok());
}

TEST_CASE("host tier never serves a block of another model under the same hash", "[host_tier]") {
  manual_clock clk(test_epoch_ns);
  retention policy;
  const auto a = small_model("model-a");
  const auto b = small_model("model-b");
  auto other_shape = *model_fingerprint::make("model-a", {2, 8, 2, 8, kv_dtype::f32});
  host_tier tier(16 * other_shape.block_bytes(), clk, policy);
  std::vector<tier_block> evicted;
  tier.put(block_of(a, 42), retention::chat, evicted);
  CHECK(tier.get({b.digest(), 42}, retention::chat) == nullptr);
  CHECK(tier.get({other_shape.digest(), 42}, retention::chat) == nullptr);
  tier.put(block_of(b, 42), retention::chat, evicted);
  CHECK(intact(tier.get({a.digest(), 42}, retention::chat), a, 42));
  CHECK(intact(tier.get({b.digest(), 42}, retention::chat), b, 42));
}

TEST_CASE(
    "a fingerprint names model, block shape, dtype and numerics; payloads must match its size",
    "[host_tier]") {
  const auto f32 = *model_fingerprint::make("m", {2, 4, 2, 8, kv_dtype::f32});
  const auto bf16 = *model_fingerprint::make("m", {2, 4, 2, 8, kv_dtype::bf16});
  CHECK(f32.text() == "model=m layers=2 block_tokens=4 kv_heads=2 head_dim=8 dtype=f32");
  CHECK(f32.digest() != bf16.digest());
  CHECK(bf16.block_bytes() == f32.block_bytes() / 2);
  CHECK(f32.values_offset(1) == 3 * f32.half_bytes());
  CHECK_FALSE(model_fingerprint::make("", {2, 4, 2, 8, kv_dtype::f32}).ok());
  CHECK_FALSE(model_fingerprint::make("m", {2, 0, 2, 8, kv_dtype::f32}).ok());
  // The kernel numerics class: f32 leaves the text as it was (blocks on SSD stay valid), another
  // class is part of the identity, and a malformed one is refused.
  CHECK(model_fingerprint::make("m", {2, 4, 2, 8, kv_dtype::f32}, "f32")->text() == f32.text());
  const auto dot = *model_fingerprint::make("m", {2, 4, 2, 8, kv_dtype::f32}, "bf16-dot");
  CHECK(dot.text() == f32.text() + " numerics=bf16-dot");
  CHECK(dot.digest() != f32.digest());
  CHECK(dot != f32);
  CHECK_FALSE(model_fingerprint::make("m", {2, 4, 2, 8, kv_dtype::f32}, "bf16 dot").ok());
  CHECK_FALSE(model_fingerprint::make("m", {2, 4, 2, 8, kv_dtype::f32}, "").ok());
  auto wrong = block_payload::make(f32, 1, std::vector<std::uint8_t>(10));
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.err().message.find("does not match") != std::string::npos);
}

TEST_CASE("host tier readers race an inserting thread and see only whole blocks", "[host_tier]") {
  system_clock clk;
  retention policy;
  const auto model = small_model();
  host_tier tier(32 * model.block_bytes(), clk, policy);
  std::atomic<bool> done{false};
  std::thread writer([&] {
    std::vector<tier_block> evicted;
    for (int round = 0; round < 2000; ++round)
      tier.put(block_of(model, static_cast<block_hash>(round % 97)), retention::chat, evicted);
    done = true;
  });
  std::size_t hits = 0;
  std::size_t bad = 0;
  while (!done) {
    for (std::uint64_t h = 0; h < 97; ++h) {
      payload_ptr p = tier.get({model.digest(), h}, retention::chat);
      if (p == nullptr) continue;
      ++hits;
      if (!intact(p, model, h)) ++bad;
    }
  }
  writer.join();
  CHECK(bad == 0);
  INFO("hits while racing: " << hits);
  REQUIRE(tier.check_invariants().ok());
}
