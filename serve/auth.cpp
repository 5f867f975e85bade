#include "serve/auth.hpp"

#include <algorithm>

namespace brigade::serve {
namespace {

bool same_bytes(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

}  // namespace

api_key_auth::api_key_auth(std::vector<std::string> keys) {
  for (auto& k : keys) {
    if (!k.empty()) keys_.push_back(std::move(k));
  }
}

bool api_key_auth::allows(std::string_view authorization) const {
  if (keys_.empty()) return true;
  constexpr std::string_view scheme = "Bearer ";
  if (authorization.size() < scheme.size()) return false;
  // The scheme is case-insensitive (RFC 7235); the key is not.
  for (size_t i = 0; i < scheme.size(); ++i) {
    const char c = authorization[i];
    const char lower = c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
    const char want =
        scheme[i] >= 'A' && scheme[i] <= 'Z' ? static_cast<char>(scheme[i] - 'A' + 'a') : scheme[i];
    if (lower != want) return false;
  }
  const std::string_view key = authorization.substr(scheme.size());
  bool allowed = false;
  for (const auto& k : keys_)
    allowed |= same_bytes(key, k);
  return allowed;
}

}  // namespace brigade::serve
