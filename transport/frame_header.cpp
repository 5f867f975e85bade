#include "transport/frame_header.hpp"

#include <cstring>
#include <string>

namespace brigade::transport {
namespace {

// The wire format is little-endian, as is every host brigade runs on; memcpy of whole fields
// compiles to plain loads and stores.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "brigade frames assume a little-endian host");

template <class T>
void put(std::byte* out, size_t offset, T value) {
  std::memcpy(out + offset, &value, sizeof value);
}

template <class T>
T get(const std::byte* in, size_t offset) {
  T value;
  std::memcpy(&value, in + offset, sizeof value);
  return value;
}

}  // namespace

void frame_header::encode(std::byte* out) const {
  put<std::uint16_t>(out, 0, magic);
  put<std::uint8_t>(out, 2, version);
  put<std::uint8_t>(out, 3, 0);
  put<std::uint16_t>(out, 4, channel);
  put<std::uint16_t>(out, 6, header_bytes);
  put<std::uint64_t>(out, 8, sender);
  put<std::uint64_t>(out, 16, sequence);
  put<std::uint64_t>(out, 24, payload_bytes);
}

result<frame_header> frame_header::decode(byte_view am_header, std::uint64_t payload_bytes) {
  if (am_header.size() < wire_bytes) {
    return error(errc::bad_format, "frame: active-message header of " +
                                       std::to_string(am_header.size()) +
                                       " bytes is shorter than the 32-byte frame header");
  }
  const std::byte* in = am_header.data();
  if (get<std::uint16_t>(in, 0) != magic) {
    return error(errc::bad_format, "frame: bad magic; the sender is not a brigade transport");
  }
  if (get<std::uint8_t>(in, 2) != version) {
    return error(errc::bad_format, "frame: version " + std::to_string(get<std::uint8_t>(in, 2)) +
                                       " is not 1; sender and receiver run different brigade "
                                       "versions");
  }
  frame_header h;
  h.channel = get<std::uint16_t>(in, 4);
  h.header_bytes = get<std::uint16_t>(in, 6);
  h.sender = get<std::uint64_t>(in, 8);
  h.sequence = get<std::uint64_t>(in, 16);
  h.payload_bytes = get<std::uint64_t>(in, 24);
  if (wire_bytes + h.header_bytes != am_header.size()) {
    return error(errc::bad_format, "frame: header says " + std::to_string(h.header_bytes) +
                                       " user header bytes but " +
                                       std::to_string(am_header.size() - wire_bytes) + " arrived");
  }
  if (h.payload_bytes != payload_bytes) {
    return error(errc::bad_format, "frame: header says " + std::to_string(h.payload_bytes) +
                                       " payload bytes but UCX delivered " +
                                       std::to_string(payload_bytes));
  }
  return h;
}

}  // namespace brigade::transport
