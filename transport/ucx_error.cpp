#include "transport/ucx_error.hpp"

namespace brigade::transport {

error ucx_error(errc code, const std::string& what, ucs_status_t status) {
  return error(code, what + ": " + ucs_status_string(status));
}

bool is_peer_failure(ucs_status_t status) {
  switch (status) {
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_REJECTED:
    case UCS_ERR_NOT_CONNECTED:
    case UCS_ERR_CANCELED:
      return true;
    default:
      return false;
  }
}

}  // namespace brigade::transport
