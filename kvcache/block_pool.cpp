#include "kvcache/block_pool.hpp"

#include <stdexcept>
#include <string>

namespace brigade::kvcache {

block_pool::block_pool(int blocks) : refs_(static_cast<size_t>(blocks), 0) {
  free_.reserve(static_cast<size_t>(blocks));
  // Hand out low block ids first: pop_back takes from the end.
  for (int b = blocks - 1; b >= 0; --b)
    free_.push_back(b);
}

bool block_pool::allocate(int count, std::vector<int32_t>& out) {
  if (count > free_blocks()) return false;
  for (int i = 0; i < count; ++i) {
    const int32_t b = free_.back();
    free_.pop_back();
    refs_[static_cast<size_t>(b)] = 1;
    out.push_back(b);
  }
  return true;
}

void block_pool::retain(int32_t block) {
  if (refs_.at(static_cast<size_t>(block)) <= 0) {
    throw std::logic_error("retain of free KV block " + std::to_string(block));
  }
  ++refs_[static_cast<size_t>(block)];
}

void block_pool::release(int32_t block) {
  int32_t& r = refs_.at(static_cast<size_t>(block));
  if (r <= 0) throw std::logic_error("release of free KV block " + std::to_string(block));
  if (--r == 0) free_.push_back(block);
}

void block_pool::release_all(const std::vector<int32_t>& blocks) {
  for (int32_t b : blocks)
    release(b);
}

}  // namespace brigade::kvcache
