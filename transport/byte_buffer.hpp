// Bytes with shared ownership: what payloads are made of on both sides of the transport.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace brigade::transport {

/// A read-only view of bytes that some other object owns; valid only as long as that owner.
class byte_view {
 public:
  byte_view() = default;
  byte_view(const void* data, size_t size)
      : data_(static_cast<const std::byte*>(data)), size_(size) {}
  byte_view(std::string_view text) : byte_view(text.data(), text.size()) {}    // NOLINT: implicit
  byte_view(const std::string& text) : byte_view(text.data(), text.size()) {}  // NOLINT: implicit
  byte_view(const char* text) : byte_view(std::string_view(text)) {}           // NOLINT: implicit

  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::string_view as_chars() const { return {reinterpret_cast<const char*>(data_), size_}; }

 private:
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

/// A contiguous block of bytes kept alive by a shared owner. Copies share the bytes; the memory
/// is released when the last copy (and every aliasing shared_ptr) is gone. The owner also
/// identifies the allocation to the registration cache, so a buffer that lives in a long-lived
/// pool (KV blocks, expert weights) is registered with UCX once and then sent without copies.
class byte_buffer {
 public:
  byte_buffer() = default;
  /// Wraps memory that `data` keeps alive; use shared_ptr's aliasing constructor to point into
  /// a larger allocation that another object owns.
  byte_buffer(std::shared_ptr<std::byte> data, size_t size) : data_(std::move(data)), size_(size) {}

  /// Uninitialised heap memory of `size` bytes.
  static byte_buffer allocate(size_t size);
  /// A fresh buffer holding a copy of `bytes`.
  static byte_buffer copy_of(byte_view bytes);

  std::byte* data() const { return data_.get(); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  byte_view view() const { return {data_.get(), size_}; }

  /// `size` bytes starting `offset` bytes in, sharing this buffer's owner.
  byte_buffer slice(size_t offset, size_t size) const;

  /// The shared owner; two buffers with the same owner belong to the same allocation.
  const std::shared_ptr<std::byte>& owner() const { return data_; }

 private:
  std::shared_ptr<std::byte> data_;
  size_t size_ = 0;
};

}  // namespace brigade::transport
