// Wall-clock time as logs, events and the registry record it.
#pragma once

#include <chrono>
#include <cstdint>

namespace brigade {

/// Milliseconds since the Unix epoch, now.
inline int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace brigade
