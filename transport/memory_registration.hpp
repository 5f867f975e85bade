// One range of memory registered with UCX (ucp_mem_map), unmapped when the last user lets go.
// In-flight operations hold a reference, so evicting a registration from the cache never pulls
// it out from under a transfer.
#pragma once

#include <cstddef>
#include <memory>

#include <ucp/api/ucp.h>

#include "common/result.hpp"

namespace brigade::transport {

class memory_registration {
 public:
  /// Registers [address, address + length) with `context`.
  static result<std::shared_ptr<memory_registration>> map(ucp_context_h context, void* address,
                                                          std::size_t length);
  ~memory_registration();
  memory_registration(const memory_registration&) = delete;
  memory_registration& operator=(const memory_registration&) = delete;

  ucp_mem_h handle() const { return memh_; }
  /// True when [data, data + size) lies inside the registered range.
  bool covers(const std::byte* data, std::size_t size) const {
    return data >= base_ && size <= length_ &&
           data - base_ <= static_cast<std::ptrdiff_t>(length_ - size);
  }
  std::size_t length() const { return length_; }

 private:
  memory_registration(ucp_context_h context, ucp_mem_h memh, const std::byte* base,
                      std::size_t length)
      : context_(context), memh_(memh), base_(base), length_(length) {}

  ucp_context_h context_;
  ucp_mem_h memh_;
  const std::byte* base_;
  std::size_t length_;
};

}  // namespace brigade::transport
