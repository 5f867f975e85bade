// One message on its way out, from send() until its completion handler has run.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <vector>

#include "common/result.hpp"
#include "transport/byte_buffer.hpp"
#include "transport/ids.hpp"
#include "transport/intrusive_list.hpp"
#include "transport/memory_registration.hpp"
#include "transport/send_completion.hpp"

namespace brigade::transport {

class outbound;

/// The active-message header of one send: the frame header then the user header. Most fit in
/// the inline bytes, so a small message needs no allocation for its header.
class am_header_bytes {
 public:
  void resize(std::size_t size) {
    size_ = size;
    if (size > inline_capacity) heap_.reset(new std::byte[size]);
  }
  std::byte* data() { return size_ > inline_capacity ? heap_.get() : inline_; }
  std::size_t size() const { return size_; }

 private:
  static constexpr std::size_t inline_capacity = 96;
  std::byte inline_[inline_capacity];
  std::unique_ptr<std::byte[]> heap_;
  std::size_t size_ = 0;
};

struct send_operation : intrusive_list_hook<send_operation> {
  peer_id to = 0;
  channel_id channel = 0;
  /// Frame header (filled in when the progress thread assigns the sequence) then user header.
  am_header_bytes am_header;
  byte_buffer payload;
  completion_handler done;
  /// Keeps the payload's UCX registration alive while a rendezvous send reads from it.
  std::shared_ptr<memory_registration> registration;
  /// The first error seen, or ok.
  status outcome;
  /// UCX requests for this message not yet completed (two when a duplicate fault applies).
  int ucx_pending = 0;
  /// Their handles, so shutdown can release requests that never completed.
  void* requests[2] = {nullptr, nullptr};
  /// The completion handler has run (early, when the peer was disconnected first).
  bool notified = false;
  /// A duplicate fault applies: post the frame twice.
  bool duplicate = false;
  /// When a delay fault lets the message go.
  std::chrono::steady_clock::time_point due;
  /// When it was handed to UCX (the send-stall watch measures from here).
  std::chrono::steady_clock::time_point posted;
  /// The outbound side that posted it, for UCX's completion callback.
  outbound* owner = nullptr;
};

}  // namespace brigade::transport
