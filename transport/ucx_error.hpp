// Turns UCX status codes into brigade errors.
#pragma once

#include <string>

#include <ucs/type/status.h>

#include "common/result.hpp"

namespace brigade::transport {

/// "<what>: <UCX's description of status>", with `code` as the kind.
error ucx_error(errc code, const std::string& what, ucs_status_t status);

/// True for the statuses UCX uses when the peer at the other end is gone.
bool is_peer_failure(ucs_status_t status);

}  // namespace brigade::transport
