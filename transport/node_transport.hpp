// A node's data plane: one UCX worker driven by its own progress thread, endpoints to peers made
// from worker addresses that the control plane exchanges, and messages delivered to per-channel
// handlers. Large payloads move by rendezvous from registered memory straight into a buffer the
// receiver allocates.
//
// Threads: every method may be called from any thread. Handlers (messages, completions, peer
// failures) run on the progress thread and must neither block nor throw; calls they make into
// the transport run inline. Sends from one thread reach one peer on one channel in order.
//
// Liveness comes from the control plane: when it declares a peer dead it calls disconnect(),
// which fails every in-flight send and receive involving that peer at once. With error mode
// `peer` (TCP), UCX also detects a reset or timed-out peer itself and does the same, reporting
// it through on_peer_failure().
//
//   start() ──> open_channel()... ──> connect(peer, address) ──> send()/receive ──> disconnect()
//                                                                      ~node_transport(): drain
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "transport/byte_buffer.hpp"
#include "transport/channel_options.hpp"
#include "transport/ids.hpp"
#include "transport/send_completion.hpp"
#include "transport/transport_config.hpp"
#include "transport/transport_stats.hpp"

namespace brigade::transport {

class progress_engine;

class node_transport {
 public:
  /// Called on the progress thread when UCX finds a peer dead (error mode `peer` only).
  using peer_failure_handler = std::function<void(peer_id peer, const error& why)>;

  /// Creates the UCX worker and starts its progress thread.
  static result<std::unique_ptr<node_transport>> start(const transport_config& config);
  /// Runs the work already submitted, flushes endpoints (bounded by close_timeout_ms), fails
  /// what is left with `cancelled` and stops the progress thread. Not from one of this
  /// transport's own handlers: it joins the thread they run on.
  ~node_transport();
  node_transport(const node_transport&) = delete;
  node_transport& operator=(const node_transport&) = delete;

  peer_id self() const;
  error_mode errors() const;
  /// The bytes peers pass to connect(); the control plane carries them.
  const std::vector<std::byte>& local_address() const;

  /// Sets (or replaces) the handlers of `channel`. Open channels before peers send on them:
  /// messages on a channel that is not open are dropped.
  status open_channel(channel_id channel, channel_options options);
  /// Creates the endpoint to `peer` from the bytes its local_address() returned.
  status connect(peer_id peer, byte_view address);
  /// The control plane's verdict that `peer` is gone: closes its endpoint by force, fails its
  /// in-flight sends and receives with an `unavailable` error naming `reason`, and drops any
  /// message from it that still arrives. Idempotent; connect() admits the peer again.
  status disconnect(peer_id peer, const std::string& reason);
  void on_peer_failure(peer_failure_handler handler);

  /// Sends `header` (copied; at most max_header_bytes) and `payload` (shared, not copied; keep
  /// it unchanged until `done` runs) to `peer` on `channel`. Payloads of at least
  /// rendezvous_threshold_bytes go by rendezvous from registered memory. Returns an error
  /// without sending when the header is too large, max_outstanding_sends sends are already
  /// outstanding (resource_exhausted) or the transport is stopping; every other outcome
  /// (including an unknown peer) reaches `done`.
  status send(peer_id peer, channel_id channel, byte_view header, byte_buffer payload,
              completion_handler done = {});

  /// Runs `task` on the progress thread (at once when called there).
  status post(std::function<void()> task);
  bool on_progress_thread() const;

  transport_stats stats() const;
  /// UCX's description of the lanes and transports of the endpoint to `peer`.
  result<std::string> describe_peer(peer_id peer);

 private:
  explicit node_transport(std::unique_ptr<progress_engine> engine);

  std::unique_ptr<progress_engine> engine_;
};

}  // namespace brigade::transport
