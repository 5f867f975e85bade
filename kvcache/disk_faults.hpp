// Named faults in the SSD tier's disk I/O, switched on at run time by fault injection (a node
// agent for its coordinator; `brigade chaos`): a slow disk, whose every block read and write
// waits a while first, and a full disk, whose block writes fail as ENOSPC does. A real full disk
// (a small file system under the tier's directory) behaves the same; this one can be switched
// on a disk that is not full.
//
// When no fault is set, the I/O paths pay one relaxed atomic load (armed()).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.hpp"

namespace brigade::kvcache {

/// What the I/O paths do while faults are set.
struct disk_fault_action {
  bool full = false;          ///< Writes fail with resource_exhausted.
  std::uint32_t slow_ms = 0;  ///< Every read and write waits this long first.
};

class disk_faults {
 public:
  static bool armed() noexcept { return armed_.load(std::memory_order_relaxed); }
  /// Sets (or replaces) the fault called `name` from "full [for_ms=N]" or "slow ms=N [for_ms=N]".
  static status set(const std::string& name, std::string_view spec);
  static void clear(const std::string& name);
  static void clear_all();
  /// The faults in force now (expired ones are dropped). Call only when armed().
  static disk_fault_action current();

 private:
  inline static std::atomic<bool> armed_{false};
};

}  // namespace brigade::kvcache
