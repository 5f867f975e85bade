#include "tests/transport/test_support.hpp"

#include <cstring>
#include <random>

namespace brigade::transport::testing {

transport_config test_config(peer_id self, const std::string& tls) {
  transport_config c;
  c.self_id = self;
  c.tls = tls;
  c.net_devices = "lo";
  return c;
}

byte_buffer random_payload(std::size_t bytes, std::uint64_t seed) {
  byte_buffer out = byte_buffer::allocate(bytes);
  std::mt19937_64 rng(seed);
  std::size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    const std::uint64_t v = rng();
    std::memcpy(out.data() + i, &v, 8);
  }
  for (; i < bytes; ++i)
    out.data()[i] = static_cast<std::byte>(rng());
  return out;
}

std::uint64_t checksum(byte_view bytes) {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    hash ^= static_cast<std::uint64_t>(bytes.data()[i]);
    hash *= 0x100000001b3ull;
  }
  return hash;
}

}  // namespace brigade::transport::testing
