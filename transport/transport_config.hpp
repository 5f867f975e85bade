// How one node's data plane is set up: UCX transports and devices, error handling, bounds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/result.hpp"
#include "transport/ids.hpp"

namespace brigade::transport {

/// How UCX reports a failed peer. UCX 1.13 supports peer-failure handling only on network
/// transports: with `peer`, endpoints over shared memory cannot be created at all, so a TLS set
/// that includes shared memory must use `none` and rely on the control plane for liveness.
enum class error_mode : std::uint8_t {
  automatic,  ///< `peer` when the TLS set has no shared-memory transport, otherwise `none`.
  peer,       ///< UCX detects peer failure (reset, timeout) and fails in-flight work itself.
  none,       ///< Only disconnect() (the control plane's verdict) fails in-flight work.
};

const char* to_string(error_mode mode);

struct transport_config {
  /// This node's id, carried in every frame so receivers know who sent it.
  peer_id self_id = 0;
  /// UCX_TLS for this worker, e.g. "tcp" or "posix,sysv,cma,self"; empty lets UCX choose.
  std::string tls;
  /// UCX_NET_DEVICES for this worker, e.g. "lo" or "mlx5_0:1"; empty lets UCX choose.
  std::string net_devices;
  error_mode errors = error_mode::automatic;
  /// Sends admitted but not yet completed, across all peers; send() fails beyond this.
  std::size_t max_outstanding_sends = 4096;
  /// Largest user header a message may carry.
  std::size_t max_header_bytes = 1024;
  /// Payloads of at least this many bytes go by rendezvous from registered memory.
  std::size_t rendezvous_threshold_bytes = 64 * 1024;
  /// How long the progress thread keeps polling after its last piece of work before it sleeps
  /// on the worker's event fd. Zero sleeps at once (lowest CPU use, highest wake-up latency).
  std::uint32_t busy_poll_us = 100;
  /// CPU the progress thread is pinned to; negative leaves it to the scheduler.
  int progress_cpu = -1;
  /// Registered allocations the registration cache keeps mapped.
  std::size_t registration_cache_entries = 256;
  /// Disconnected peers remembered so their late messages are dropped.
  std::size_t max_departed_peers = 4096;
  /// How long shutdown waits for endpoints to flush before it closes them by force.
  std::uint32_t close_timeout_ms = 1000;
  /// A peer none of whose sends completed for this long is taken as failed (on_peer_failure):
  /// UCX over TCP can keep an endpoint whose other end was closed for many seconds without a
  /// word, and with no error nobody makes the link again. 0 turns the watch off.
  std::uint32_t send_stall_ms = 3000;
};

/// The error mode a configuration really runs with (resolves `automatic`).
error_mode effective_error_mode(const transport_config& config);

/// True when `tls` names a shared-memory transport (or leaves the choice to UCX, which then
/// includes shared memory).
bool tls_includes_shared_memory(const std::string& tls);

/// Checks bounds and combinations; the error names the field and what to change.
status validate(const transport_config& config);

}  // namespace brigade::transport
