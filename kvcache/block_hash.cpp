#include "kvcache/block_hash.hpp"

#include <xxhash.h>

#include <cassert>

namespace brigade::kvcache {

block_hash hash_block(block_hash parent, const std::int32_t* tokens, std::size_t block_size) {
  return XXH3_64bits_withSeed(tokens, block_size * sizeof(std::int32_t), parent);
}

std::vector<block_hash> hash_chain(const std::int32_t* tokens, std::size_t token_count,
                                   std::size_t block_size, block_hash seed) {
  std::vector<block_hash> chain;
  extend_hash_chain(chain, tokens, token_count, block_size, seed);
  return chain;
}

std::size_t extend_hash_chain(std::vector<block_hash>& chain, const std::int32_t* tokens,
                              std::size_t token_count, std::size_t block_size, block_hash seed) {
  assert(block_size > 0);
  const std::size_t full_blocks = token_count / block_size;
  const std::size_t before = chain.size();
  chain.reserve(full_blocks);
  block_hash parent = chain.empty() ? seed : chain.back();
  for (std::size_t b = before; b < full_blocks; ++b) {
    parent = hash_block(parent, tokens + b * block_size, block_size);
    chain.push_back(parent);
  }
  return chain.size() > before ? chain.size() - before : 0;
}

}  // namespace brigade::kvcache
