// The host-memory tier of the KV cache: whole blocks in RAM under a byte budget, LRU.
//
// Thread-safe: a worker's step thread reads while the tiered store's background thread inserts
// promoted blocks and hands evicted ones to the SSD tier. Payloads are shared pointers, so a
// block a reader holds stays valid after the tier evicts it; the budget counts what the tier
// itself holds. Retention follows kvcache/tier_block.hpp: an expired block is a miss and is
// removed when get() meets it or expire() sweeps.
#pragma once

#include <cstddef>
#include <list>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "common/result.hpp"
#include "kvcache/tier_block.hpp"

namespace brigade::kvcache {

class host_tier {
 public:
  /// A tier holding at most `budget_bytes` of payload. `clk` and `policy` must outlive it.
  host_tier(std::size_t budget_bytes, const clock& clk, const retention& policy);
  host_tier(const host_tier&) = delete;
  host_tier& operator=(const host_tier&) = delete;

  /// Stores `payload` as used now under `scenario` (replacing an equal block, whose longer
  /// retention it keeps), then evicts least recently used blocks into `evicted` until the tier
  /// is within budget. A block larger than the whole budget is not stored: it goes straight to
  /// `evicted`, so that the caller can still demote it.
  void put(payload_ptr payload, scenario_id scenario, std::vector<tier_block>& evicted);

  /// The block under `key`, used now under `scenario` (it becomes the most recently used and
  /// its retention may lengthen); null when absent or expired (an expired block is removed).
  payload_ptr get(const block_key& key, scenario_id scenario);

  /// Whether an unexpired block is stored under `key`; changes nothing.
  bool contains(const block_key& key) const;

  /// Removes the block under `key`; returns whether there was one.
  bool erase(const block_key& key);

  /// Removes every expired block into `expired`; returns how many. O(blocks).
  std::size_t expire(std::vector<tier_block>& expired);

  tier_stats stats() const;
  std::size_t budget_bytes() const { return budget_bytes_; }

  /// Checks that the LRU list, the map, the byte count and the per-scenario counts agree and that
  /// the tier is within budget; O(blocks), for tests.
  status check_invariants() const;

 private:
  struct entry {
    payload_ptr payload;
    scenario_id scenario = retention::chat;
    time_ns last_use_ns = 0;
    /// This entry's place in lru_ (front: least recently used).
    std::list<block_key>::iterator lru_position;
  };
  using entry_map = std::unordered_map<block_key, entry, block_key_hasher>;

  void remove_locked(entry_map::iterator it);
  void count_scenario_locked(scenario_id scenario, int delta);
  bool expired_locked(const entry& e, time_ns now) const;

  const std::size_t budget_bytes_;
  const clock& clock_;
  const retention& retention_;
  mutable std::mutex mutex_;
  entry_map entries_;
  std::list<block_key> lru_;
  tier_stats stats_;
};

}  // namespace brigade::kvcache
