// One UCX context and worker, configured from a transport_config, and the address peers use to
// reach it. The worker runs in UCS_THREAD_MODE_SINGLE: only the progress thread may touch it.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include <ucp/api/ucp.h>

#include "common/result.hpp"
#include "transport/transport_config.hpp"

namespace brigade::transport {

class ucx_worker {
 public:
  /// Reads UCX's configuration, overrides UCX_TLS and UCX_NET_DEVICES from `config` (so the
  /// manifest wins over the environment), and creates the context and worker with active
  /// messages and wake-up support.
  static result<std::unique_ptr<ucx_worker>> create(const transport_config& config);
  ~ucx_worker();
  ucx_worker(const ucx_worker&) = delete;
  ucx_worker& operator=(const ucx_worker&) = delete;

  ucp_context_h context() const { return context_; }
  ucp_worker_h handle() const { return worker_; }
  /// A file descriptor that becomes readable when the worker has events (see ucp_worker_arm).
  int event_fd() const { return event_fd_; }
  /// The raw UCX worker address.
  const std::vector<std::byte>& address() const { return address_; }
  /// Largest active-message header the worker can send.
  std::size_t max_am_header_bytes() const { return max_am_header_bytes_; }

  /// Destroys the worker (and with it every endpoint and request) but keeps the context, so
  /// memory registrations can still be unmapped afterwards.
  void destroy_worker();

 private:
  ucx_worker() = default;
  status init_context(const transport_config& config);
  status init_worker();

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int event_fd_ = -1;
  std::vector<std::byte> address_;
  std::size_t max_am_header_bytes_ = 0;
};

}  // namespace brigade::transport
