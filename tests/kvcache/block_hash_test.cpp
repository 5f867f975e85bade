// The keyed block hash: its chain semantics, SipHash-2-4-128 against OpenSSL's, salts and keys,
// a collision crafted under the old unkeyed scheme, and brute-forced collisions of a truncated
// hash, which show that the index compares the whole hash and nothing less.
#define XXH_INLINE_ALL  // the old scheme's public secret, to craft a collision as an attacker would
#include <xxhash.h>

#include "kvcache/block_hash.hpp"

#include <openssl/core_names.h>
#include <openssl/evp.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <random>
#include <unordered_map>
#include <vector>

#include "kvcache/clock.hpp"
#include "kvcache/global_prefix_index.hpp"
#include "kvcache/hash_key.hpp"
#include "kvcache/legacy_hash.hpp"
#include "kvcache/prefix_index.hpp"
#include "kvcache/retention.hpp"
#include "tests/kvcache/index_helpers.hpp"

using namespace brigade::kvcache;
using brigade::kvcache::testing::test_hasher;

namespace {

std::vector<std::int32_t> random_tokens(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::int32_t> t(n);
  for (auto& x : t)
    x = static_cast<std::int32_t>(rng() % 50000);
  return t;
}

/// OpenSSL's SipHash-2-4 with 16-byte output: an independent implementation to check ours by.
block_hash openssl_siphash128(const hash_key_bytes& key, const std::vector<std::uint8_t>& msg) {
  EVP_MAC* mac = EVP_MAC_fetch(nullptr, "SIPHASH", nullptr);
  REQUIRE(mac != nullptr);
  EVP_MAC_CTX* ctx = EVP_MAC_CTX_new(mac);
  std::size_t size = 16;
  OSSL_PARAM params[] = {OSSL_PARAM_construct_size_t(OSSL_MAC_PARAM_SIZE, &size),
                         OSSL_PARAM_construct_end()};
  REQUIRE(EVP_MAC_init(ctx, key.data(), key.size(), params) == 1);
  REQUIRE(EVP_MAC_update(ctx, msg.data(), msg.size()) == 1);
  unsigned char out[16];
  std::size_t written = 0;
  REQUIRE(EVP_MAC_final(ctx, out, &written, sizeof out) == 1);
  REQUIRE(written == 16);
  EVP_MAC_CTX_free(ctx);
  EVP_MAC_free(mac);
  block_hash h;
  std::memcpy(&h.lo, out, 8);
  std::memcpy(&h.hi, out + 8, 8);
  return h;
}

/// A cached chain's index and one lookup: how many leading blocks of `probe` hit.
std::size_t hits_after(const std::vector<block_hash>& cached,
                       const std::vector<block_hash>& probe) {
  manual_clock clk{1};
  retention policy;
  prefix_index index(64, clk, policy);
  std::int64_t next_id = 0;
  std::vector<removed_block> removed;
  testing::serve(index, cached, next_id, removed);
  return index.match(probe);
}

}  // namespace

TEST_CASE("only full blocks are hashed", "[kvcache][block_hash]") {
  const auto tokens = random_tokens(100, 1);
  const block_hasher& h = test_hasher();
  CHECK(h.chain(tokens.data(), tokens.size(), 16).size() == 6);
  CHECK(h.chain(tokens.data(), 96, 16).size() == 6);
  CHECK(h.chain(tokens.data(), 15, 16).empty());
}

TEST_CASE("equal prefixes give equal hashes up to the first differing block",
          "[kvcache][block_hash]") {
  auto a = random_tokens(160, 2);
  auto b = a;
  b[75] += 1;  // inside block 4 of 16-token blocks
  const auto ha = test_hasher().chain(a.data(), a.size(), 16);
  const auto hb = test_hasher().chain(b.data(), b.size(), 16);
  REQUIRE(ha.size() == 10);
  for (std::size_t i = 0; i < 4; ++i)
    CHECK(ha[i] == hb[i]);
  // The changed block and every block after it differ: each hash covers the whole prefix.
  for (std::size_t i = 4; i < 10; ++i)
    CHECK(ha[i] != hb[i]);
}

TEST_CASE("a block's hash depends on its parent, not only its own tokens",
          "[kvcache][block_hash]") {
  const block_hasher& h = test_hasher();
  const auto block = random_tokens(16, 3);
  CHECK(h.hash_block(1, block.data(), 16) != h.hash_block(2, block.data(), 16));
  CHECK(h.hash_block({1, 5}, block.data(), 16) != h.hash_block({2, 5}, block.data(), 16));
  auto a = random_tokens(32, 4);
  auto b = random_tokens(32, 5);
  std::copy(block.begin(), block.end(), a.begin() + 16);
  std::copy(block.begin(), block.end(), b.begin() + 16);
  CHECK(h.chain(a.data(), 32, 16)[1] != h.chain(b.data(), 32, 16)[1]);
}

TEST_CASE("extending a chain as tokens arrive equals hashing the whole prompt",
          "[kvcache][block_hash]") {
  const block_hasher& h = test_hasher();
  const auto tokens = random_tokens(1000, 6);
  for (const char* salt : {"", "tenant-a"}) {
    const auto whole = h.chain(tokens.data(), tokens.size(), 32, salt);
    std::vector<block_hash> grown;
    std::size_t added = 0;
    for (std::size_t n = 0; n <= tokens.size(); n += 7)
      added += h.extend(grown, tokens.data(), n, 32, salt);
    added += h.extend(grown, tokens.data(), tokens.size(), 32, salt);
    CHECK(grown == whole);
    CHECK(added == whole.size());
    CHECK(whole.size() == 31);
  }
}

TEST_CASE("the block hash is SipHash-2-4-128, bit for bit OpenSSL's", "[kvcache][block_hash]") {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    hash_key_bytes key;
    for (auto& b : key)
      b = static_cast<std::uint8_t>(rng());
    const std::uint64_t k0 = [&] {
      std::uint64_t v;
      std::memcpy(&v, key.data(), 8);
      return v;
    }();
    std::uint64_t k1;
    std::memcpy(&k1, key.data() + 8, 8);
    const std::uint64_t prefix[2] = {rng(), rng()};
    std::vector<std::uint8_t> data(static_cast<std::size_t>(trial % 70));
    for (auto& b : data)
      b = static_cast<std::uint8_t>(rng());
    std::vector<std::uint8_t> msg(16);
    std::memcpy(msg.data(), prefix, 16);
    msg.insert(msg.end(), data.begin(), data.end());
    INFO("trial " << trial << ", " << data.size() << " bytes after the prefix");
    CHECK(siphash128(k0, k1, prefix, data.data(), data.size()) == openssl_siphash128(key, msg));
  }
  // And a block's hash is that function of (parent, tokens) under the hasher's key.
  const hash_key_bytes key{9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2, 3, 4, 5, 6};
  const block_hasher h(key);
  const auto tokens = random_tokens(16, 12);
  const block_hash parent{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  std::vector<std::uint8_t> msg(16 + 64);
  std::memcpy(msg.data(), &parent.lo, 8);
  std::memcpy(msg.data() + 8, &parent.hi, 8);
  std::memcpy(msg.data() + 16, tokens.data(), 64);
  CHECK(h.hash_block(parent, tokens.data(), 16) == openssl_siphash128(key, msg));
}

TEST_CASE("salts and keys separate chains completely", "[kvcache][block_hash]") {
  const auto tokens = random_tokens(64, 13);
  const block_hasher& h = test_hasher();
  const auto shared = h.chain(tokens.data(), tokens.size(), 16);
  const auto a = h.chain(tokens.data(), tokens.size(), 16, "tenant-a");
  const auto a_again = h.chain(tokens.data(), tokens.size(), 16, "tenant-a");
  const auto b = h.chain(tokens.data(), tokens.size(), 16, "tenant-b");
  CHECK(a == a_again);
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i] != shared[i]);
    CHECK(a[i] != b[i]);
  }
  CHECK(hits_after(a, b) == 0);
  CHECK(hits_after(a, shared) == 0);
  CHECK(hits_after(a, a_again) == 4);

  const block_hasher other(random_hash_key());
  const auto keyed_elsewhere = other.chain(tokens.data(), tokens.size(), 16);
  CHECK(hits_after(shared, keyed_elsewhere) == 0);
  CHECK(other.key_id() != h.key_id());
  CHECK(block_hasher(random_hash_key()).key_id() != block_hasher(random_hash_key()).key_id());
  const hash_key_bytes fixed{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  CHECK(block_hasher(fixed).key_id() == h.key_id());
}

TEST_CASE("a collision crafted under the old unkeyed hash is no longer a hit",
          "[kvcache][block_hash]") {
  // XXH3-64 of a 64-byte input sums mix16B(lane, secret, seed) over four 16-byte lanes, where
  // mix16B multiplies (lane_lo ^ (secret_lo + seed)) by (lane_hi ^ (secret_hi - seed)). The
  // secret is public and the old seed (the parent's hash) was computable by anyone, so a client
  // could make the first factor of lane 0 zero; then lane 0's last 8 bytes (tokens 2 and 3) do
  // not change the hash at all.
  const auto victim = random_tokens(16, 14);
  std::uint64_t secret_lo;
  std::memcpy(&secret_lo, XXH3_kSecret, 8);
  const std::uint64_t zeroing = secret_lo + legacy::root_seed;
  auto crafted = victim;
  std::memcpy(crafted.data(), &zeroing, 8);  // tokens 0 and 1
  auto other = crafted;
  other[2] ^= 0x1234;
  other[3] ^= 0x5678;
  REQUIRE(crafted != other);

  const auto old_crafted = legacy::chain(crafted.data(), 16, 16);
  const auto old_other = legacy::chain(other.data(), 16, 16);
  REQUIRE(old_crafted.size() == 1);
  CHECK(old_crafted == old_other);  // the old scheme: a hit, KV of other text served
  CHECK(hits_after(old_crafted, old_other) == 1);

  const block_hasher& h = test_hasher();
  const auto new_crafted = h.chain(crafted.data(), 16, 16);
  const auto new_other = h.chain(other.data(), 16, 16);
  CHECK(new_crafted != new_other);
  CHECK(hits_after(new_crafted, new_other) == 0);
}

TEST_CASE("brute-forced collisions of a truncated hash: the index compares exactly the hash",
          "[kvcache][block_hash]") {
  // At 20 bits a collision takes about a thousand blocks to find. The index must treat a
  // colliding block as the cached one (it keys on the hash alone, so the hash's width is what
  // protects it) and the full-width hash must tell the two apart.
  block_hasher truncated = test_hasher();
  truncated.truncate_for_test(20);
  std::unordered_map<block_hash, std::vector<std::int32_t>> seen;
  std::vector<std::int32_t> first, second;
  for (std::uint32_t seed = 0; seed < 200000 && first.empty(); ++seed) {
    auto block = random_tokens(16, 1000 + seed);
    const block_hash hb = truncated.chain(block.data(), 16, 16)[0];
    auto [it, fresh] = seen.emplace(hb, block);
    if (!fresh && it->second != block) {
      first = it->second;
      second = block;
    }
  }
  REQUIRE_FALSE(first.empty());
  const auto t_first = truncated.chain(first.data(), 16, 16);
  const auto t_second = truncated.chain(second.data(), 16, 16);
  CHECK(t_first == t_second);
  CHECK(hits_after(t_first, t_second) == 1);
  const auto f_first = test_hasher().chain(first.data(), 16, 16);
  const auto f_second = test_hasher().chain(second.data(), 16, 16);
  CHECK(f_first != f_second);
  CHECK(hits_after(f_first, f_second) == 0);
}

TEST_CASE("hashes equal in one word but not the other never match", "[kvcache][block_hash]") {
  // Hash maps bucket by the low word: a lookup must still compare all 128 bits, in the worker's
  // index and in the router's global index.
  const std::vector<block_hash> cached{{1, 42}, {1, 43}};
  const std::vector<block_hash> same_lo{{2, 42}, {2, 43}};
  const std::vector<block_hash> same_hi{{1, 44}, {1, 45}};
  CHECK(hits_after(cached, cached) == 2);
  CHECK(hits_after(cached, same_lo) == 0);
  CHECK(hits_after(cached, same_hi) == 0);

  global_prefix_index global(1);
  REQUIRE(global.apply(blocks_stored{0, cached}));
  std::vector<std::size_t> leading;
  global.match(same_lo, leading);
  CHECK(leading[0] == 0);
  global.match(cached, leading);
  CHECK(leading[0] == 2);
}

TEST_CASE("a block hash prints as 32 hex digits, high word first", "[kvcache][block_hash]") {
  CHECK(to_hex({0x0123456789abcdefULL, 0x0fedcba987654321ULL}) ==
        "0123456789abcdef0fedcba987654321");
  CHECK(to_hex({}) == std::string(32, '0'));
}
