#include "kvcache/block_hash.hpp"

#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <vector>

using namespace brigade::kvcache;

namespace {

std::vector<std::int32_t> random_tokens(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::int32_t> t(n);
  for (auto& x : t)
    x = static_cast<std::int32_t>(rng() % 50000);
  return t;
}

}  // namespace

TEST_CASE("only full blocks are hashed", "[kvcache][block_hash]") {
  const auto tokens = random_tokens(100, 1);
  CHECK(hash_chain(tokens.data(), tokens.size(), 16).size() == 6);
  CHECK(hash_chain(tokens.data(), 96, 16).size() == 6);
  CHECK(hash_chain(tokens.data(), 15, 16).empty());
}

TEST_CASE("equal prefixes give equal hashes up to the first differing block",
          "[kvcache][block_hash]") {
  auto a = random_tokens(160, 2);
  auto b = a;
  b[75] += 1;  // inside block 4 of 16-token blocks
  const auto ha = hash_chain(a.data(), a.size(), 16);
  const auto hb = hash_chain(b.data(), b.size(), 16);
  REQUIRE(ha.size() == 10);
  for (std::size_t i = 0; i < 4; ++i)
    CHECK(ha[i] == hb[i]);
  // The changed block and every block after it differ: each hash covers the whole prefix.
  for (std::size_t i = 4; i < 10; ++i)
    CHECK(ha[i] != hb[i]);
}

TEST_CASE("a block's hash depends on its parent, not only its own tokens",
          "[kvcache][block_hash]") {
  const auto block = random_tokens(16, 3);
  CHECK(hash_block(1, block.data(), 16) != hash_block(2, block.data(), 16));
  auto a = random_tokens(32, 4);
  auto b = random_tokens(32, 5);
  std::copy(block.begin(), block.end(), a.begin() + 16);
  std::copy(block.begin(), block.end(), b.begin() + 16);
  CHECK(hash_chain(a.data(), 32, 16)[1] != hash_chain(b.data(), 32, 16)[1]);
  CHECK(hash_chain(a.data(), 32, 16, 7)[0] != hash_chain(a.data(), 32, 16, 8)[0]);
}

TEST_CASE("extending a chain as tokens arrive equals hashing the whole prompt",
          "[kvcache][block_hash]") {
  const auto tokens = random_tokens(1000, 6);
  const auto whole = hash_chain(tokens.data(), tokens.size(), 32);
  std::vector<block_hash> grown;
  std::size_t added = 0;
  for (std::size_t n = 0; n <= tokens.size(); n += 7) {
    added += extend_hash_chain(grown, tokens.data(), n, 32);
  }
  added += extend_hash_chain(grown, tokens.data(), tokens.size(), 32);
  CHECK(grown == whole);
  CHECK(added == whole.size());
  CHECK(whole.size() == 31);
}
