#include "transport/worker_address.hpp"

#include <cstdint>
#include <cstring>

namespace brigade::transport {
namespace {

constexpr char magic[8] = {'B', 'R', 'G', 'D', 'A', 'D', 'D', 'R'};
constexpr std::uint8_t envelope_version = 1;
constexpr std::size_t fixed_bytes = 8 + 1 + 1 + 8 + 2 + 4 + 8;

std::uint64_t fnv1a(const std::byte* data, std::size_t size) {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  for (std::size_t i = 0; i < size; ++i) {
    hash ^= static_cast<std::uint64_t>(data[i]);
    hash *= 0x100000001b3ull;
  }
  return hash;
}

void append_uint(std::vector<std::byte>& out, std::uint64_t value, std::size_t bytes) {
  for (std::size_t i = 0; i < bytes; ++i)
    out.push_back(static_cast<std::byte>(value >> (8 * i)));
}

std::uint64_t read_uint(const std::byte* in, std::size_t bytes) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < bytes; ++i)
    value |= static_cast<std::uint64_t>(in[i]) << (8 * i);
  return value;
}

error malformed(const std::string& what) {
  return error(errc::bad_format, "worker address: " + what +
                                     "; pass the exact bytes the peer's local_address() returned");
}

}  // namespace

std::vector<std::byte> worker_address::encode() const {
  std::vector<std::byte> out;
  out.reserve(fixed_bytes + tls.size() + ucx_address.size());
  for (char c : magic)
    out.push_back(static_cast<std::byte>(c));
  out.push_back(static_cast<std::byte>(envelope_version));
  out.push_back(static_cast<std::byte>(errors));
  append_uint(out, node, 8);
  append_uint(out, tls.size(), 2);
  for (char c : tls)
    out.push_back(static_cast<std::byte>(c));
  append_uint(out, ucx_address.size(), 4);
  out.insert(out.end(), ucx_address.begin(), ucx_address.end());
  append_uint(out, fnv1a(out.data(), out.size()), 8);
  return out;
}

result<worker_address> worker_address::decode(byte_view bytes) {
  const std::byte* in = bytes.data();
  const std::size_t size = bytes.size();
  if (size < fixed_bytes) {
    return malformed(std::to_string(size) + " bytes is shorter than the smallest envelope");
  }
  if (std::memcmp(in, magic, sizeof magic) != 0) return malformed("bad magic");
  if (static_cast<std::uint8_t>(in[8]) != envelope_version) {
    return malformed("envelope version " + std::to_string(static_cast<int>(in[8])) +
                     " is not 1 (different brigade versions?)");
  }
  if (read_uint(in + size - 8, 8) != fnv1a(in, size - 8)) return malformed("checksum mismatch");
  worker_address out;
  const auto mode = static_cast<std::uint8_t>(in[9]);
  if (mode != static_cast<std::uint8_t>(error_mode::peer) &&
      mode != static_cast<std::uint8_t>(error_mode::none)) {
    return malformed("unknown error mode " + std::to_string(mode));
  }
  out.errors = static_cast<error_mode>(mode);
  out.node = read_uint(in + 10, 8);
  const std::size_t tls_bytes = read_uint(in + 18, 2);
  if (tls_bytes > max_tls_bytes || fixed_bytes + tls_bytes > size) {
    return malformed("TLS length " + std::to_string(tls_bytes) + " does not fit");
  }
  out.tls.assign(reinterpret_cast<const char*>(in + 20), tls_bytes);
  const std::size_t address_at = 20 + tls_bytes + 4;
  const std::size_t address_bytes = read_uint(in + 20 + tls_bytes, 4);
  if (address_bytes == 0 || address_bytes > max_ucx_address_bytes ||
      address_at + address_bytes + 8 != size) {
    return malformed("UCX address length " + std::to_string(address_bytes) +
                     " does not match the envelope size " + std::to_string(size));
  }
  out.ucx_address.assign(in + address_at, in + address_at + address_bytes);
  return out;
}

}  // namespace brigade::transport
