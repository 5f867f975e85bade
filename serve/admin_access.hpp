// Who may call the admin routes (/v1/admin/*: kill an actor, start a migration, inject faults on
// nodes). They can take the service down, so one rule decides for all of them, from the keys
// configured and the address the server listens on.
#pragma once

#include <string>
#include <string_view>

namespace brigade::serve {

enum class admin_access {
  admin_keys,       ///< Admin keys are configured: only they open the admin routes.
  api_keys,         ///< No admin key but API keys: any API key opens them (the fallback).
  open_loopback,    ///< No key at all, listening on loopback: open to local callers.
  open_by_opt_in,   ///< No key at all on another address, and the manifest opts in.
  refused_no_keys,  ///< No key at all on another address: refused (403).
};

/// The rule: admin keys first, then API keys; without any key, open on a loopback address and
/// elsewhere only when `open_without_key` (the manifest's serve.admin_without_key).
admin_access admin_access_for(bool have_admin_keys, bool have_api_keys,
                              std::string_view listen_host, bool open_without_key);

/// Whether `host` is a loopback address: 127.0.0.0/8, ::1 (also as [::1] or ::ffff:127.x.y.z)
/// or "localhost". Anything else, 0.0.0.0 and :: included, reaches beyond this machine.
bool is_loopback_host(std::string_view host);

/// One sentence for the start line of `brigade serve`: which rule applies and what it means.
std::string describe(admin_access access);

}  // namespace brigade::serve
