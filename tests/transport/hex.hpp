// Hex text for passing worker addresses between test processes over pipes.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace brigade::transport::testing {

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

}  // namespace brigade::transport::testing
