// What the transport benchmark's two processes agree on: channels and the bulk-round header.
// Worker addresses pass over the pipes between them as hex text (common/hex.hpp).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "transport/ids.hpp"

namespace brigade::bench::transport_bench {

/// The driver is node 1, the peer node 2.
inline constexpr transport::peer_id driver_node = 1;
inline constexpr transport::peer_id peer_node = 2;

/// 8 B pings; the peer echoes each one back on the same channel.
inline constexpr transport::channel_id ping_channel = 1;
/// Bulk messages; the peer counts them and acknowledges each complete round on ack_channel.
inline constexpr transport::channel_id bulk_channel = 2;
inline constexpr transport::channel_id ack_channel = 3;

/// Header of every bulk message: which round it belongs to and how many messages the round has.
struct bulk_round {
  std::uint32_t round = 0;
  std::uint32_t messages = 0;

  std::string encode() const {
    std::string out(sizeof round + sizeof messages, '\0');
    std::memcpy(&out[0], &round, sizeof round);
    std::memcpy(&out[sizeof round], &messages, sizeof messages);
    return out;
  }
  static bool decode(const void* data, std::size_t size, bulk_round& out) {
    if (size != sizeof out.round + sizeof out.messages) return false;
    std::memcpy(&out.round, data, sizeof out.round);
    std::memcpy(&out.messages, static_cast<const char*>(data) + sizeof out.round,
                sizeof out.messages);
    return true;
  }
};

}  // namespace brigade::bench::transport_bench
