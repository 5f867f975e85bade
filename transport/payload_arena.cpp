#include "transport/payload_arena.hpp"

namespace brigade::transport {

byte_buffer payload_arena::allocate(std::size_t bytes) {
  if (bytes > max_slice_bytes) return byte_buffer::allocate(bytes);
  // Slices start on 16-byte boundaries, so payloads can be read as any scalar type.
  const std::size_t rounded = (bytes + 15) & ~std::size_t{15};
  if (chunk_.empty() || used_ + rounded > chunk_bytes) {
    chunk_ = byte_buffer::allocate(chunk_bytes);
    used_ = 0;
  }
  byte_buffer slice = chunk_.slice(used_, bytes);
  used_ += rounded;
  return slice;
}

}  // namespace brigade::transport
