#include "serve/admin_access.hpp"

#include <arpa/inet.h>

#include <cstring>

namespace brigade::serve {

admin_access admin_access_for(bool have_admin_keys, bool have_api_keys,
                              std::string_view listen_host, bool open_without_key) {
  if (have_admin_keys) return admin_access::admin_keys;
  if (have_api_keys) return admin_access::api_keys;
  if (is_loopback_host(listen_host)) return admin_access::open_loopback;
  return open_without_key ? admin_access::open_by_opt_in : admin_access::refused_no_keys;
}

bool is_loopback_host(std::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host == "localhost") return true;
  const std::string text(host);
  unsigned char v4[4];
  if (inet_pton(AF_INET, text.c_str(), v4) == 1) return v4[0] == 127;
  unsigned char v6[16];
  if (inet_pton(AF_INET6, text.c_str(), v6) != 1) return false;
  static const unsigned char loopback[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(v6, loopback, 16) == 0) return true;
  return std::memcmp(v6, mapped, 12) == 0 && v6[12] == 127;
}

std::string describe(admin_access access) {
  switch (access) {
    case admin_access::admin_keys:
      return "admin routes (/v1/admin/*) protected by admin keys";
    case admin_access::api_keys:
      return "admin routes (/v1/admin/*) accept any API key, as no admin key is set "
             "(serve.admin_keys or --admin-key)";
    case admin_access::open_loopback:
      return "admin routes (/v1/admin/*) open without a key, on loopback only";
    case admin_access::open_by_opt_in:
      return "admin routes (/v1/admin/*) open without a key on a public address, as the "
             "manifest opts in (serve.admin_without_key)";
    case admin_access::refused_no_keys:
      return "admin routes (/v1/admin/*) refused: no key is set and the address is not "
             "loopback (set serve.admin_keys or --admin-key)";
  }
  return "";
}

}  // namespace brigade::serve
