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

char lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

}  // namespace

bool valid_cache_salt(std::string_view salt) {
  // Characters are the bytes that start one (any but a continuation byte, 10xxxxxx).
  size_t chars = 0;
  for (char c : salt)
    chars += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return chars > 0 && chars <= max_cache_salt_chars;
}

std::vector<api_key> unbound_keys(const std::vector<std::string>& keys) {
  std::vector<api_key> out;
  for (const auto& k : keys)
    out.push_back({k, ""});
  return out;
}

api_key_auth::api_key_auth(std::vector<api_key> keys) {
  for (auto& k : keys) {
    if (!k.key.empty()) keys_.push_back(std::move(k));
  }
}

const api_key* api_key_auth::match(std::string_view authorization) const {
  constexpr std::string_view scheme = "Bearer ";
  if (authorization.size() < scheme.size()) return nullptr;
  // The scheme is case-insensitive (RFC 7235); the key is not.
  for (size_t i = 0; i < scheme.size(); ++i) {
    if (lower(authorization[i]) != lower(scheme[i])) return nullptr;
  }
  const std::string_view key = authorization.substr(scheme.size());
  // No early exit and no branch on a comparison: the index is selected by a mask.
  size_t found = keys_.size();
  for (size_t i = 0; i < keys_.size(); ++i) {
    const size_t mask = ~(static_cast<size_t>(same_bytes(key, keys_[i].key)) - 1);
    found = (found & ~mask) | (i & mask);
  }
  return found < keys_.size() ? &keys_[found] : nullptr;
}

std::string effective_cache_salt(std::string_view bound, std::string_view client) {
  if (bound.empty() && client.empty()) return {};
  std::string out = std::to_string(bound.size());
  out += ':';
  out += bound;
  out += '|';
  out += client;
  return out;
}

}  // namespace brigade::serve
