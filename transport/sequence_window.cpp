#include "transport/sequence_window.hpp"

namespace brigade::transport {

bool sequence_window::accept(std::uint64_t sequence) {
  if (sequence == 0) return false;
  if (sequence > highest_) {
    const std::uint64_t shift = sequence - highest_;
    seen_ = shift >= span ? 0 : seen_ << shift;
    seen_ |= 1;
    highest_ = sequence;
    return true;
  }
  const std::uint64_t age = highest_ - sequence;
  if (age >= span) return false;
  const std::uint64_t bit = std::uint64_t{1} << age;
  if (seen_ & bit) return false;
  seen_ |= bit;
  return true;
}

}  // namespace brigade::transport
