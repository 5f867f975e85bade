// Lower-case hexadecimal text for bytes: nonces and proofs in the join handshake, and worker
// addresses passed between processes as lines of text.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace brigade {

/// Two lower-case hex digits per byte.
std::string to_hex(const void* data, std::size_t size);
inline std::string to_hex(const std::vector<std::byte>& bytes) {
  return to_hex(bytes.data(), bytes.size());
}

/// The bytes `text` spells, or nothing when it is not an even number of hex digits (either case).
std::optional<std::vector<std::byte>> from_hex(std::string_view text);

}  // namespace brigade
