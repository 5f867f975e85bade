// The block hash brigade used before its hashes were keyed: XXH3-64 chained from a public seed.
// Kept only to measure against (`brigade replay`, `brigade bench cache`) and for the test that
// crafts a collision under it; nothing that serves requests calls it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kvcache/block_hash.hpp"

namespace brigade::kvcache::legacy {

/// The public seed of block 0.
inline constexpr std::uint64_t root_seed = 0x6272696761646521ULL;

/// XXH3-64 of one block's tokens, seeded with its parent's hash.
std::uint64_t hash_block(std::uint64_t parent, const std::int32_t* tokens, std::size_t block_size);

/// The legacy chain of `tokens`' full blocks, each 64-bit hash widened into a block_hash (hi 0).
std::vector<block_hash> chain(const std::int32_t* tokens, std::size_t token_count,
                              std::size_t block_size);

}  // namespace brigade::kvcache::legacy
