// Storage for small received payloads: slices of a shared chunk instead of one heap allocation
// each. An eager message then costs a reference-count increment rather than a malloc and a
// free, which is a large share of a sub-microsecond message.
//
// A slice keeps its whole chunk alive, so a handler that holds on to many small payloads for a
// long time pins up to chunk_bytes for each; such a handler should copy what it keeps. Used only
// on the progress thread.
#pragma once

#include <cstddef>

#include "transport/byte_buffer.hpp"

namespace brigade::transport {

class payload_arena {
 public:
  static constexpr std::size_t chunk_bytes = 16 * 1024;
  /// Payloads up to this size come from the arena; larger ones get their own allocation.
  static constexpr std::size_t max_slice_bytes = 512;

  byte_buffer allocate(std::size_t bytes);

 private:
  byte_buffer chunk_;
  std::size_t used_ = chunk_bytes;
};

}  // namespace brigade::transport
