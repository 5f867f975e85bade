// Chained, keyed hashes of full token blocks: the identity of a cached KV block.
//
// The KV of a block depends on every token before it, so a block is named by the hash of its own
// tokens chained to the hash of its parent block: hash_0 = H_k(root(salt), tokens of block 0) and
// hash_i = H_k(hash_{i-1}, tokens of block i). Only full blocks are hashed: a partial last block
// is still being written and is never cached.
//
// Why keyed and 128 bits wide (issue 29). A hit compares no tokens: two requests share a block
// exactly when their hashes are equal. With a public hash a client could craft a prompt whose
// blocks collide with another client's and be served KV computed from someone else's text. H is
// SipHash-2-4 with 128-bit output (a pseudo-random function of its key), keyed with a secret
// each deployment makes at first start (kvcache/hash_key.hpp): without the key nobody can
// predict a hash, let alone craft a collision. At 128 bits the chance that any two of 10^12
// distinct blocks collide by accident is below 10^24 / 2^129, about 1.5e-15.
//
// The salt (a request's cache_salt, or the one its API key is bound to) enters the root of the
// chain, so requests with different salts share no block: tenants cannot see each other's hits,
// through cached_tokens or through timing.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace brigade::kvcache {

/// The chained hash of one full block of tokens.
struct block_hash {
  std::uint64_t hi = 0;
  std::uint64_t lo = 0;

  constexpr block_hash() = default;
  constexpr block_hash(std::uint64_t high, std::uint64_t low) : hi(high), lo(low) {}
  /// A small number as a block's name (hi 0): what tests and synthetic traces write. Hashes
  /// that name real blocks come only from block_hasher.
  constexpr block_hash(std::uint64_t low) : lo(low) {}  // NOLINT(google-explicit-constructor)

  friend constexpr bool operator==(const block_hash& a, const block_hash& b) {
    return a.hi == b.hi && a.lo == b.lo;
  }
  friend constexpr bool operator!=(const block_hash& a, const block_hash& b) { return !(a == b); }
  friend constexpr bool operator<(const block_hash& a, const block_hash& b) {
    return a.hi != b.hi ? a.hi < b.hi : a.lo < b.lo;
  }
};

/// 32 lowercase hex digits, hi then lo: names files and log lines.
std::string to_hex(const block_hash& h);

/// Serialisation for actor messages (CAF's inspect; no CAF header needed here).
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, block_hash& x) {
  return f(x.hi, x.lo);
}

/// The secret of a deployment's block hashes: 128 bits.
using hash_key_bytes = std::array<std::uint8_t, 16>;

/// Hashes blocks under one key. Cheap to copy; every thread may use one at once.
class block_hasher {
 public:
  /// The hash scheme, as block files and logs name it.
  static constexpr const char* scheme = "siphash-2-4-128";

  explicit block_hasher(const hash_key_bytes& key);

  /// The seed of block 0 for requests with `salt` (empty: the shared namespace).
  block_hash root(std::string_view salt = {}) const;

  /// The hash of one full block of `block_size` tokens whose parent block hashes to `parent`.
  block_hash hash_block(const block_hash& parent, const std::int32_t* tokens,
                        std::size_t block_size) const;

  /// The hash chain of every full block in `tokens[0, token_count)` under `salt`; the tail
  /// shorter than `block_size` gets no hash. `block_size` must be positive.
  std::vector<block_hash> chain(const std::int32_t* tokens, std::size_t token_count,
                                std::size_t block_size, std::string_view salt = {}) const;

  /// Extends `chain` (the hashes of the first chain.size() blocks of `tokens` under `salt`) with
  /// the full blocks that follow, as a running sequence grows; returns how many were added.
  std::size_t extend(std::vector<block_hash>& chain, const std::int32_t* tokens,
                     std::size_t token_count, std::size_t block_size,
                     std::string_view salt = {}) const;

  /// Names the key without revealing it (a hash of a fixed label under the key): block files
  /// carry it, so a cache written under another key is recognised and dropped.
  std::uint64_t key_id() const { return key_id_; }

  /// Test hook: keep only the low `bits` (1..128) of every hash, so that a test can brute-force
  /// collisions and show that the code compares exactly the hash. Never set in a deployment.
  void truncate_for_test(int bits);

 private:
  block_hash finish(block_hash h) const;

  std::uint64_t k0_ = 0;
  std::uint64_t k1_ = 0;
  std::uint64_t key_id_ = 0;
  int bits_ = 128;
};

/// SipHash-2-4 with 128-bit output of the 16 bytes `prefix` (two little-endian words) followed
/// by `data[0, bytes)`, under key (k0, k1). Exposed for its test against OpenSSL's.
block_hash siphash128(std::uint64_t k0, std::uint64_t k1, const std::uint64_t prefix[2],
                      const void* data, std::size_t bytes);

}  // namespace brigade::kvcache

/// For hash maps: a block hash is a pseudo-random function's output, so its low word is already
/// uniformly spread.
template <>
struct std::hash<brigade::kvcache::block_hash> {
  std::size_t operator()(const brigade::kvcache::block_hash& h) const noexcept {
    return static_cast<std::size_t>(h.lo);
  }
};
