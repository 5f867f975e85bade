// Bearer API keys: with keys configured, every /v1/ request must carry
// "Authorization: Bearer <key>" naming one of them; without keys, everything is allowed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace brigade::serve {

class api_key_auth {
 public:
  api_key_auth() = default;
  explicit api_key_auth(std::vector<std::string> keys);

  bool enabled() const { return !keys_.empty(); }
  /// True when auth is off or `authorization` is "Bearer " followed by a configured key. The
  /// comparison takes the same time wherever the first difference is, so timing reveals no key.
  bool allows(std::string_view authorization) const;

 private:
  std::vector<std::string> keys_;
};

}  // namespace brigade::serve
