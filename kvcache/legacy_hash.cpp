#include "kvcache/legacy_hash.hpp"

#include <xxhash.h>

namespace brigade::kvcache::legacy {

std::uint64_t hash_block(std::uint64_t parent, const std::int32_t* tokens, std::size_t block_size) {
  return XXH3_64bits_withSeed(tokens, block_size * sizeof(std::int32_t), parent);
}

std::vector<block_hash> chain(const std::int32_t* tokens, std::size_t token_count,
                              std::size_t block_size) {
  std::vector<block_hash> out;
  std::uint64_t parent = root_seed;
  for (std::size_t b = 0; b < token_count / block_size; ++b) {
    parent = hash_block(parent, tokens + b * block_size, block_size);
    out.push_back(block_hash{0, parent});
  }
  return out;
}

}  // namespace brigade::kvcache::legacy
