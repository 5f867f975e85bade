// What the transport benchmark's two processes agree on: channels, the bulk-round header, and
// hex text for passing worker addresses over the pipes between them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

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

inline std::string to_hex(const std::vector<std::byte>& bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (std::byte b : bytes) {
    out.push_back(digits[static_cast<unsigned>(b) >> 4]);
    out.push_back(digits[static_cast<unsigned>(b) & 15]);
  }
  return out;
}

inline std::vector<std::byte> from_hex(const std::string& text) {
  const auto value = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  std::vector<std::byte> out;
  for (std::size_t i = 0; i + 1 < text.size(); i += 2) {
    out.push_back(static_cast<std::byte>(value(text[i]) * 16 + value(text[i + 1])));
  }
  return out;
}

}  // namespace brigade::bench::transport_bench
