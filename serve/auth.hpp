// Bearer keys: with keys configured, a request names one of them in
// "Authorization: Bearer <key>"; an API key may be bound to a prefix-cache salt, which then
// isolates its tenant's cached KV from everyone else's whatever the client sends.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace brigade::serve {

/// Longest `cache_salt`, a request's or one bound to a key, in characters.
constexpr size_t max_cache_salt_chars = 256;

/// Whether UTF-8 `salt` has 1 to max_cache_salt_chars characters: the rule for both.
bool valid_cache_salt(std::string_view salt);

/// One accepted key (the manifest's serve.api_keys, serve.admin_keys or --api-key).
struct api_key {
  std::string key;
  /// The prefix-cache salt of every request made with this key; "" binds none.
  std::string cache_salt;

  bool operator==(const api_key& other) const {
    return key == other.key && cache_salt == other.cache_salt;
  }
};

/// Plain keys, none bound to a salt.
std::vector<api_key> unbound_keys(const std::vector<std::string>& keys);

class api_key_auth {
 public:
  api_key_auth() = default;
  /// Empty keys are dropped: they would match a bare "Bearer ".
  explicit api_key_auth(std::vector<api_key> keys);

  bool enabled() const { return !keys_.empty(); }
  /// The configured key `authorization` names ("Bearer " and the key), or nullptr. Every key is
  /// compared whole, and the comparison takes the same time wherever the first difference is,
  /// so timing reveals neither a key nor which one matched.
  const api_key* match(std::string_view authorization) const;

 private:
  std::vector<api_key> keys_;
};

/// The prefix-cache namespace of a request (generation_request::cache_salt) from the salt its
/// API key is bound to and the client's `cache_salt` field ("" for none): "" when both are
/// empty (the shared namespace), otherwise "<bytes of bound>:<bound>|<client>". The encoding
/// is one-to-one on the pair, so two requests share cached KV only when both the bound salt and
/// the client's salt are the same: a client can never reach a bound tenant's namespace by
/// sending its salt, nor a tenant another tenant's by adding one.
std::string effective_cache_salt(std::string_view bound, std::string_view client);

}  // namespace brigade::serve
