// Remembers which sequence numbers of one (sender, channel) stream have arrived, so duplicates
// can be dropped. It tolerates reordering within the last 64 numbers; anything older than that
// is treated as a duplicate, since no path in the transport delays a message that far behind
// its successors without also failing it.
#pragma once

#include <cstdint>

namespace brigade::transport {

class sequence_window {
 public:
  static constexpr std::uint64_t span = 64;

  /// True the first time `sequence` (>= 1) is seen; false for a repeat or a number too old to
  /// tell apart from one.
  bool accept(std::uint64_t sequence);

  std::uint64_t highest() const { return highest_; }

 private:
  std::uint64_t highest_ = 0;
  /// Bit i set: sequence highest_ - i has arrived.
  std::uint64_t seen_ = 0;
};

}  // namespace brigade::transport
