// Cache events: what workers tell the router about their prefix caches, so that the router's
// global prefix index (kvcache/global_prefix_index.hpp) knows which worker holds which block.
// Each worker publishes its events in the order its index changed.
#pragma once

#include <cstdint>
#include <vector>

#include "kvcache/block_hash.hpp"

namespace brigade::kvcache {

/// A worker's index in the router's table of workers.
using worker_id = std::uint32_t;

/// A worker cached new blocks (insert() stored them).
struct blocks_stored {
  /// The worker whose cache changed.
  worker_id worker = 0;
  /// The hashes of the stored blocks, each block's parent before it.
  std::vector<block_hash> hashes;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, blocks_stored& x) {
  return f(x.worker, x.hashes);
}

/// A worker dropped blocks by eviction or expiry.
struct blocks_removed {
  /// The worker whose cache changed.
  worker_id worker = 0;
  /// The hashes of the removed blocks, each block's children before it.
  std::vector<block_hash> hashes;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, blocks_removed& x) {
  return f(x.worker, x.hashes);
}

/// A worker lost its whole cache (it restarted or died).
struct cache_cleared {
  /// The worker whose cache is now empty.
  worker_id worker = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cache_cleared& x) {
  return f(x.worker);
}

}  // namespace brigade::kvcache
