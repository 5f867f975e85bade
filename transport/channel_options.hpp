// What a node does with the messages that arrive on one channel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "common/result.hpp"
#include "transport/byte_buffer.hpp"
#include "transport/ids.hpp"

namespace brigade::transport {

/// One message as its receiver gets it.
struct received_message {
  /// Node that sent it.
  peer_id from = 0;
  channel_id channel = 0;
  /// Position in the sender's stream to this node on this channel, starting at 1.
  std::uint64_t sequence = 0;
  /// The sender's header bytes; valid only during the handler call (copy what you keep).
  byte_view header;
  /// The payload, in a buffer from the channel's allocator; the handler may keep or move it.
  byte_buffer payload;
};

/// Called on the progress thread for every message delivered on the channel. It must not block:
/// hand the message on (e.g. into an actor's mailbox) and return.
using message_handler = std::function<void(received_message& message)>;

/// Returns the buffer a payload of `bytes` bytes from `from` lands in; large payloads are
/// written there directly by UCX. Called on the progress thread, possibly inside a UCX
/// callback: it must not call into the transport. An error refuses the message, which is then
/// reported to the channel's receive-error handler.
using payload_allocator =
    std::function<result<byte_buffer>(peer_id from, channel_id channel, std::size_t bytes)>;

/// Called on the progress thread when a message that had started to arrive cannot be delivered
/// (its sender was disconnected or failed, or the allocator refused it).
using receive_error_handler =
    std::function<void(peer_id from, channel_id channel, const error& why)>;

struct channel_options {
  message_handler on_message;
  /// Empty: plain heap memory (byte_buffer::allocate).
  payload_allocator allocate;
  /// Optional.
  receive_error_handler on_receive_error;
  /// Drop a message whose sequence number already arrived (e.g. a duplicated frame).
  bool drop_duplicates = false;
};

}  // namespace brigade::transport
