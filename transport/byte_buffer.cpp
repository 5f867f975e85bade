#include "transport/byte_buffer.hpp"

#include <cassert>
#include <cstring>

namespace brigade::transport {

namespace {

/// Storage for small buffers, allocated together with its reference count in one allocation.
template <size_t Bytes>
struct alignas(16) small_block {
  std::byte data[Bytes];
};

template <size_t Bytes>
byte_buffer allocate_small(size_t size) {
  auto block = std::make_shared<small_block<Bytes>>();
  return byte_buffer(std::shared_ptr<std::byte>(block, block->data), size);
}

}  // namespace

byte_buffer byte_buffer::allocate(size_t size) {
  // Small messages are the common case: one allocation instead of two.
  if (size <= 64) return allocate_small<64>(size);
  if (size <= 512) return allocate_small<512>(size);
  // new std::byte[n] leaves the bytes uninitialised: receive buffers are overwritten anyway, and
  // touching 64 MiB just to zero it would cost more than the transfer into it.
  std::shared_ptr<std::byte> data(new std::byte[size == 0 ? 1 : size],
                                  std::default_delete<std::byte[]>());
  return byte_buffer(std::move(data), size);
}

byte_buffer byte_buffer::copy_of(byte_view bytes) {
  byte_buffer out = allocate(bytes.size());
  if (!bytes.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

byte_buffer byte_buffer::slice(size_t offset, size_t size) const {
  assert(offset <= size_ && size <= size_ - offset);
  return byte_buffer(std::shared_ptr<std::byte>(data_, data_.get() + offset), size);
}

}  // namespace brigade::transport
