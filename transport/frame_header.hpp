// The fixed header in front of every message on the wire (inside the UCX active-message header).
//
//   offset  size  field
//        0     2  magic 0xB61D
//        2     1  version (1)
//        3     1  flags (reserved, 0)
//        4     2  channel
//        6     2  user header bytes that follow this header
//        8     8  sender node id
//       16     8  sequence number, per (sender, receiver, channel), starting at 1
//       24     8  payload bytes
//
// Fields are little-endian. The sequence number lets a channel drop duplicates.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/result.hpp"
#include "transport/byte_buffer.hpp"
#include "transport/ids.hpp"

namespace brigade::transport {

struct frame_header {
  static constexpr std::size_t wire_bytes = 32;
  static constexpr std::uint16_t magic = 0xB61D;
  static constexpr std::uint8_t version = 1;
  /// The UCX active-message id every brigade frame travels under.
  static constexpr unsigned am_id = 11;

  channel_id channel = 0;
  std::uint16_t header_bytes = 0;
  peer_id sender = 0;
  std::uint64_t sequence = 0;
  std::uint64_t payload_bytes = 0;

  /// Writes the header's wire_bytes bytes to `out`.
  void encode(std::byte* out) const;

  /// Reads a header from the start of `am_header`, checking it against the whole active-message
  /// header and the payload length UCX reported; the error says which field is inconsistent.
  static result<frame_header> decode(byte_view am_header, std::uint64_t payload_bytes);
};

}  // namespace brigade::transport
