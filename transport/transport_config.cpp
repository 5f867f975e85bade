#include "transport/transport_config.hpp"

#include <sstream>

namespace brigade::transport {

const char* to_string(error_mode mode) {
  switch (mode) {
    case error_mode::automatic:
      return "automatic";
    case error_mode::peer:
      return "peer";
    case error_mode::none:
      return "none";
  }
  return "unknown";
}

bool tls_includes_shared_memory(const std::string& tls) {
  if (tls.empty()) return true;
  std::istringstream names(tls);
  std::string name;
  while (std::getline(names, name, ',')) {
    // A leading '^' excludes the transports that follow, so UCX may still pick shared memory.
    if (!name.empty() && name[0] == '^') return true;
    if (name == "all" || name == "sm" || name == "shm" || name == "posix" || name == "sysv" ||
        name == "cma" || name == "knem" || name == "xpmem" || name == "mm") {
      return true;
    }
  }
  return false;
}

error_mode effective_error_mode(const transport_config& config) {
  if (config.errors != error_mode::automatic) return config.errors;
  return tls_includes_shared_memory(config.tls) ? error_mode::none : error_mode::peer;
}

status validate(const transport_config& config) {
  if (config.max_outstanding_sends == 0) {
    return error(errc::invalid_argument,
                 "transport: max_outstanding_sends is 0; it must allow at least one send");
  }
  if (config.max_header_bytes > 16 * 1024) {
    return error(errc::invalid_argument, "transport: max_header_bytes " +
                                             std::to_string(config.max_header_bytes) +
                                             " is above 16384; large data belongs in the payload");
  }
  if (config.rendezvous_threshold_bytes == 0) {
    return error(errc::invalid_argument,
                 "transport: rendezvous_threshold_bytes is 0; use at least 1 (e.g. 65536)");
  }
  if (config.registration_cache_entries == 0) {
    return error(errc::invalid_argument, "transport: registration_cache_entries must be >= 1");
  }
  if (config.errors == error_mode::peer && tls_includes_shared_memory(config.tls)) {
    return error(errc::invalid_argument,
                 "transport: error mode 'peer' with UCX_TLS '" + config.tls +
                     "': UCX 1.13 cannot create shared-memory endpoints with peer-failure "
                     "handling; use error mode 'none' (or 'automatic') or a TLS set without "
                     "shared memory, such as 'tcp'");
  }
  return ok_status();
}

}  // namespace brigade::transport
