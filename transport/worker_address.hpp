// The bytes a node hands the control plane so that peers can reach its UCX worker.
//
// UCX parses a raw worker address without checking it, so a corrupted or foreign blob could
// crash the receiver. The envelope adds a magic, a version, the sender's node id, its error mode
// and TLS set (UCX cannot connect a `peer`-mode endpoint to a `none`-mode worker over shared
// memory, and the ids must match what the control plane believes) and a checksum.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "transport/byte_buffer.hpp"
#include "transport/ids.hpp"
#include "transport/transport_config.hpp"

namespace brigade::transport {

struct worker_address {
  /// Node that owns the worker.
  peer_id node = 0;
  /// Error mode its endpoints use; peers must use the same.
  error_mode errors = error_mode::none;
  /// Its UCX_TLS setting, for error messages when two nodes cannot agree.
  std::string tls;
  /// The address ucp_worker_get_address returned.
  std::vector<std::byte> ucx_address;

  static constexpr std::size_t max_ucx_address_bytes = 64 * 1024;
  static constexpr std::size_t max_tls_bytes = 256;

  std::vector<std::byte> encode() const;
  /// Checks and unpacks an envelope; the error says what is wrong with the bytes.
  static result<worker_address> decode(byte_view bytes);
};

}  // namespace brigade::transport
