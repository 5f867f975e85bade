// The router's cluster-wide view of the prefix caches, built only from cache events.
//
// For every cached block hash it keeps the set of workers holding it; for a request's hash chain
// it answers how many leading blocks each worker holds. Workers' indexes never hold a block
// without its parent, so a worker's leading run of a chain is exactly what its own match() would
// report once the worker's events have arrived.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "common/result.hpp"
#include "kvcache/cache_events.hpp"

namespace brigade::kvcache {

class global_prefix_index {
 public:
  /// An index for workers 0 .. worker_count - 1.
  explicit global_prefix_index(std::size_t worker_count);

  /// Applies one event. Events are idempotent: storing a block a worker already holds, or
  /// removing one it does not, changes nothing and returns an error naming the inconsistency
  /// (a lost or duplicated event) for the caller to log.
  status apply(const blocks_stored& event);
  status apply(const blocks_removed& event);
  status apply(const cache_cleared& event);

  /// Sets `leading[w]` to the number of leading blocks of `chain` that worker w holds;
  /// `leading` is resized to the worker count.
  void match(const std::vector<block_hash>& chain, std::vector<std::size_t>& leading) const;

  /// Whether worker `w` holds `hash`.
  bool holds(worker_id w, block_hash hash) const;
  /// Distinct block hashes held by at least one worker.
  std::size_t distinct_blocks() const { return holders_.size(); }
  /// Blocks held by worker `w`.
  std::size_t blocks_on(worker_id w) const { return blocks_per_worker_.at(w); }
  std::size_t worker_count() const { return blocks_per_worker_.size(); }

 private:
  status check_worker(worker_id w) const;

  /// Sorted worker ids per block: replicas of one block are few, so a small vector beats a set.
  std::unordered_map<block_hash, std::vector<worker_id>> holders_;
  std::vector<std::size_t> blocks_per_worker_;
};

}  // namespace brigade::kvcache
