// The physical KV blocks of one worker: allocation and reference counts.
//
// A block is shared when several sequences (or the prefix cache) hold it; it returns to the free
// list only when its last holder releases it, so no step ever reads a block that was reused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace brigade::kvcache {

class block_pool {
 public:
  explicit block_pool(int blocks);

  int capacity() const { return static_cast<int>(refs_.size()); }
  int free_blocks() const { return static_cast<int>(free_.size()); }
  int used_blocks() const { return capacity() - free_blocks(); }

  /// Allocates `count` blocks (reference count 1 each) into `out`, or none if too few are free.
  bool allocate(int count, std::vector<int32_t>& out);
  /// Adds a holder to a block in use.
  void retain(int32_t block);
  /// Drops a holder; the block is free again when none remain.
  void release(int32_t block);
  void release_all(const std::vector<int32_t>& blocks);
  int ref_count(int32_t block) const { return refs_[static_cast<size_t>(block)]; }

 private:
  std::vector<int32_t> refs_;
  std::vector<int32_t> free_;
};

}  // namespace brigade::kvcache
