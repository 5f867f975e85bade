// Chained hashes of full token blocks: the identity of a cached KV block.
//
// The KV of a block depends on every token before it, so a block is named by the hash of its own
// tokens seeded with the hash of its parent block: hash_0 = H(root_seed, tokens of block 0) and
// hash_i = H(hash_{i-1}, tokens of block i). Two requests share a block hash exactly when they
// share every token up to the end of that block (up to 64-bit collisions). Only full blocks are
// hashed: a partial last block is still being written and is never cached.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace brigade::kvcache {

/// The chained hash of one full block of tokens.
using block_hash = std::uint64_t;

/// The seed of block 0. A deployment serving several models (or adapters) would salt this so that
/// equal prompts to different models never share KV.
inline constexpr block_hash root_seed = 0x6272696761646521ULL;

/// The hash of one full block of `block_size` tokens whose parent block hashes to `parent`.
block_hash hash_block(block_hash parent, const std::int32_t* tokens, std::size_t block_size);

/// The hash chain of every full block in `tokens[0, token_count)`; the tail shorter than
/// `block_size` gets no hash. `block_size` must be positive.
std::vector<block_hash> hash_chain(const std::int32_t* tokens, std::size_t token_count,
                                   std::size_t block_size, block_hash seed = root_seed);

/// Extends `chain` (the hashes of the first chain.size() blocks of `tokens`) with the full blocks
/// that follow, as a running sequence grows; returns how many hashes were added.
std::size_t extend_hash_chain(std::vector<block_hash>& chain, const std::int32_t* tokens,
                              std::size_t token_count, std::size_t block_size,
                              block_hash seed = root_seed);

}  // namespace brigade::kvcache
