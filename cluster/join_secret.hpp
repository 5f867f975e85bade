// The join secret: a coordinator and a node each prove they know it, without sending it, by an
// HMAC-SHA256 over both sides' fresh nonces. A peer that cannot prove it gets nothing spawned.
#pragma once

#include <cstddef>
#include <string>

#include "common/result.hpp"
#include "kvcache/block_hash.hpp"

namespace brigade::cluster {

/// Reads a secret file: its contents without the trailing newline, at least 16 bytes.
result<std::string> read_join_secret(const std::string& path);

/// The length of a nonce: 16 random bytes in hex.
constexpr std::size_t nonce_chars = 32;

/// nonce_chars hex characters from the kernel's random source.
std::string random_nonce();

/// The proof `role` ("node" or "coordinator") gives for the nonce pair (first, second).
std::string join_proof(const std::string& secret, const std::string& role, const std::string& first,
                       const std::string& second);

/// The key every side of a deployment hashes prefix-cache blocks with (kvcache/block_hash.hpp):
/// HMAC-SHA256 of a fixed label under the join secret, so that the coordinator and each node
/// compute it alone and it never crosses the network.
kvcache::hash_key_bytes block_hash_key(const std::string& secret);

/// Compares two proofs in constant time.
bool proofs_equal(const std::string& a, const std::string& b);

}  // namespace brigade::cluster
