// Keeps UCX memory registrations of recently sent (or received-into) buffers, so that a buffer
// from a long-lived pool is registered once and then moved without copies or re-registration.
//
// Entries are keyed by the buffer's shared owner, not by its address: when the owner dies the
// entry is dropped even if the allocator hands the same address to a new buffer, which is the
// classic way address-keyed registration caches go stale. The cache is bounded and evicts the
// least recently used entry. It is used only on the progress thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <ucp/api/ucp.h>

#include "common/result.hpp"
#include "transport/byte_buffer.hpp"
#include "transport/memory_registration.hpp"

namespace brigade::transport {

class registration_cache {
 public:
  registration_cache(ucp_context_h context, std::size_t max_entries)
      : context_(context), max_entries_(max_entries) {}

  /// The registration covering `buffer`'s bytes, registering them on first use.
  result<std::shared_ptr<memory_registration>> acquire(const byte_buffer& buffer);

  std::size_t entries() const { return entries_.size(); }
  std::uint64_t hits() const { return hits_; }
  std::uint64_t misses() const { return misses_; }

 private:
  struct entry {
    std::weak_ptr<std::byte> owner;
    std::shared_ptr<memory_registration> registration;
    std::uint64_t last_use = 0;
  };

  void drop_dead_and_excess();

  ucp_context_h context_;
  std::size_t max_entries_;
  std::vector<entry> entries_;
  std::uint64_t clock_ = 0;
  std::uint64_t hits_ = 0;
  std::uint64_t misses_ = 0;
};

}  // namespace brigade::transport
