// What the tiers share: a block with its retention state, the retention rule and the counters.
//
// Retention in the tiers: a block carries the scenario with the longest retention period among
// those that used it, and expires at its last use plus that period. This is what the SSD tier
// can keep across a restart (the scenario in the block file, the last use as the file's
// modification time), and both tiers follow it so that a block keeps one expiry as it moves. It
// never expires sooner than the prefix index's rule (the latest of each use plus its scenario's
// period), and at most by the gap between its longest-retention use and its last use later.
#pragma once

#include <cstdint>
#include <vector>

#include "kvcache/block_payload.hpp"
#include "kvcache/clock.hpp"
#include "kvcache/retention.hpp"

namespace brigade::kvcache {

/// A block leaving one tier for another (or for good), with its retention state.
struct tier_block {
  payload_ptr payload;
  /// The longest-retention scenario that used the block.
  scenario_id scenario = retention::chat;
  time_ns last_use_ns = 0;
};

/// The scenario a block keeps after a use under `used`: the one with the longer period.
inline scenario_id longer_retention(const retention& policy, scenario_id current,
                                    scenario_id used) {
  return policy.period_ns(used) > policy.period_ns(current) ? used : current;
}

/// When a block last used at `last_use_ns` under the retention of `scenario` expires.
inline time_ns expiry_of(const retention& policy, scenario_id scenario, time_ns last_use_ns) {
  return last_use_ns + policy.period_ns(scenario);
}

/// One tier's counters. Blocks and bytes are what it holds now; the rest count since it opened.
struct tier_stats {
  std::uint64_t blocks = 0;
  std::uint64_t bytes = 0;
  std::uint64_t budget_bytes = 0;
  /// get() found the block (and, on SSD, its bytes passed the checksum).
  std::uint64_t hits = 0;
  /// get() did not find it: absent, expired, corrupt, or of another model.
  std::uint64_t misses = 0;
  std::uint64_t insertions = 0;
  /// Blocks removed to stay within the byte budget, least recently used first.
  std::uint64_t evictions = 0;
  /// Blocks removed because their retention period passed.
  std::uint64_t expirations = 0;
  /// SSD: blocks whose checksum, header or length was wrong; dropped, never served.
  std::uint64_t corrupt_blocks = 0;
  /// SSD: writes or flushes refused with ENOSPC, EDQUOT or EFBIG.
  std::uint64_t disk_full_events = 0;
  /// SSD: other failed reads and writes (the block is dropped or not stored).
  std::uint64_t io_errors = 0;
  /// Resident blocks by scenario label, indexed by scenario_id.
  std::vector<std::uint64_t> blocks_by_scenario;
};

}  // namespace brigade::kvcache
