// Small helpers shared by the prefix index tests.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "kvcache/block_hash.hpp"
#include "kvcache/prefix_index.hpp"

namespace brigade::kvcache::testing {

/// A hasher with a fixed key, so that a failure repeats.
inline const block_hasher& test_hasher() {
  static const block_hasher hasher(
      hash_key_bytes{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16});
  return hasher;
}

/// The hash chain of a prompt whose blocks are one token each: chain_of({1, 2, 4}) shares its
/// first two blocks with chain_of({1, 2, 3}).
inline std::vector<block_hash> chain_of(std::initializer_list<std::int32_t> tokens) {
  const std::vector<std::int32_t> t(tokens);
  return test_hasher().chain(t.data(), t.size(), 1);
}

/// One whole request against `index`: match, acquire, insert the rest with ids from
/// `next_block_id`, release. Returns the number of blocks it found cached.
inline std::size_t serve(prefix_index& index, const std::vector<block_hash>& chain,
                         std::int64_t& next_block_id, std::vector<removed_block>& removed,
                         scenario_id scenario = retention::chat) {
  const std::size_t hits = index.match(chain);
  std::vector<std::int64_t> ids;
  if (!index.acquire(chain, hits, scenario, ids)) return static_cast<std::size_t>(-1);
  std::size_t held = hits;
  for (std::size_t i = hits; i < chain.size(); ++i) {
    if (!index.insert(chain, i, next_block_id++, scenario, removed)) break;
    ++held;
  }
  if (!index.release(chain, held)) return static_cast<std::size_t>(-1);
  return hits;
}

inline std::vector<block_hash> hashes_of(const std::vector<removed_block>& removed) {
  std::vector<block_hash> out;
  for (const auto& r : removed)
    out.push_back(r.hash);
  return out;
}

}  // namespace brigade::kvcache::testing
