// The sending half of a node's transport: endpoints to peers, sequence numbers, fault points,
// rendezvous from registered memory, and failing in-flight sends fast when a peer goes away.
// Used only on the progress thread.
//
// Life of a send:
//
//   submit ──> [delayed] ──> posted to UCX ──> completed ──> handler runs (after progress)
//      │            │              │
//      │            └──────────────┴──> peer disconnected/failed: handler runs now with the
//      │                                 error; UCX releases its requests later ("orphan")
//      └──> no endpoint, severed, dropped: completed at once
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <ucp/api/ucp.h>

#include "common/result.hpp"
#include "transport/intrusive_list.hpp"
#include "transport/registration_cache.hpp"
#include "transport/send_operation.hpp"
#include "transport/transport_config.hpp"
#include "transport/transport_stats.hpp"
#include "transport/worker_address.hpp"

namespace brigade::transport {

class outbound {
 public:
  using clock = std::chrono::steady_clock;

  /// `outstanding` counts admitted sends; each completion gives one back.
  outbound(ucp_worker_h worker, const transport_config& config, registration_cache& registrations,
           stats_counters& stats, std::atomic<std::size_t>& outstanding);
  /// Frees what is left; the UCX worker must already be destroyed (no more callbacks).
  ~outbound();
  outbound(const outbound&) = delete;
  outbound& operator=(const outbound&) = delete;

  /// Creates the endpoint to `address.node`.
  status connect(const worker_address& address);
  /// Fails every pending send to `peer` with `why` now and closes its endpoint by force.
  /// Returns false when `peer` has no endpoint.
  bool disconnect(peer_id peer, const error& why);
  bool connected(peer_id peer) const { return peers_.count(peer) != 0; }

  void submit(std::unique_ptr<send_operation> op);
  /// The progress thread's fast path for a small message: sends it at once with the header built
  /// on the stack and no operation allocated. Returns false, having done nothing, when the
  /// message must take submit() instead (large payload, faults armed, unknown peer, earlier
  /// sends to the peer still pending, or UCX cannot complete it immediately). Such a send is
  /// not counted against max_outstanding_sends: it is never outstanding.
  bool try_send_now(peer_id to, channel_id channel, byte_view header, const byte_buffer& payload,
                    completion_handler& done);
  bool has_delayed() const { return !delayed_.empty(); }
  /// Reports (as failed peers) those whose oldest send in flight is older than `limit`.
  void check_stalled(clock::time_point now, std::chrono::milliseconds limit);
  /// Whether any send waits for UCX to complete it.
  bool has_in_flight() const;
  /// Posts delayed sends whose time has come; true if there were any.
  bool post_due_delays(clock::time_point now);
  /// Milliseconds until the next delayed send is due, or -1 if none is waiting.
  int ms_until_next_delay(clock::time_point now) const;
  /// Runs the handlers of completed sends and reaps closed endpoints; true if anything happened.
  bool after_progress();
  bool has_failed_peers() const { return !failed_peers_.empty(); }
  /// Peers whose endpoints UCX reported as failed since the last call, with the reason.
  std::vector<std::pair<peer_id, error>> take_failed_peers();

  /// Shutdown: fails delayed sends and closes every endpoint (flushing first unless `force`).
  void close_all(bool force, const error& why);
  /// Shutdown, after close_all: fails the sends still waiting on flushing endpoints.
  void abandon_closing(const error& why);
  /// Shutdown, last step before the worker is destroyed: hands every request UCX still holds
  /// back to it (no callback follows). The operations are freed with this object.
  void release_requests();
  /// Progresses the worker until no endpoint to `peer` is still closing, for at most `limit`;
  /// false if one still is. Only on the progress thread, outside UCX's callbacks.
  bool wait_closed(peer_id peer, std::chrono::milliseconds limit);
  /// True once every endpoint close has completed.
  bool all_closed() const { return peers_.empty() && closing_.empty(); }

  /// UCX's description of the lanes and transports of the endpoint to `peer`.
  result<std::string> describe(peer_id peer) const;

 private:
  struct peer_state;

  static void on_send_done(void* request, ucs_status_t status, void* user_data);
  static void on_endpoint_error(void* arg, ucp_ep_h ep, ucs_status_t status);

  /// The last sequence number used on `channel` to `peer` (0 before the first message).
  std::uint64_t& sequence_of(peer_state& peer, channel_id channel);
  /// Applies the armed fault points; returns true when they consumed the operation.
  bool apply_faults(std::unique_ptr<send_operation>& op);
  void post(peer_state& peer, std::unique_ptr<send_operation> op);
  /// Queues `op`'s handler with `outcome` and frees the operation.
  void complete(std::unique_ptr<send_operation> op, status outcome);
  /// Queues the handler of an operation that UCX still holds; UCX frees it later.
  void complete_early(send_operation& op, status outcome);
  void start_close(std::unique_ptr<peer_state> peer, bool force);
  /// Completes the delayed sends to `peer` (to every peer when `all_peers`) with `why`.
  void fail_delayed(peer_id peer, const error& why, bool all_peers);
  bool reap_closed();

  ucp_worker_h worker_;
  const transport_config& config_;
  stats_counters& stats_;
  std::atomic<std::size_t>& outstanding_;
  registration_cache& registrations_;
  std::unordered_map<peer_id, std::unique_ptr<peer_state>> peers_;
  /// The last sequence numbers of closed links, per peer: a new link to it numbers on.
  std::unordered_map<peer_id, std::vector<std::pair<channel_id, std::uint64_t>>> retired_sequences_;
  /// Endpoints being closed; their peer_state stays alive until UCX is done with it.
  std::vector<std::unique_ptr<peer_state>> closing_;
  /// Sends whose handler already ran but whose UCX requests are still outstanding.
  intrusive_list<send_operation> orphans_;
  std::vector<std::unique_ptr<send_operation>> delayed_;
  /// A completed send whose handler has yet to run.
  struct finished {
    completion_handler done;
    status outcome;
    std::size_t payload_bytes = 0;
    /// Admitted through max_outstanding_sends (false for try_send_now).
    bool counted = true;
  };
  std::vector<finished> finished_;
  std::vector<std::pair<peer_id, error>> failed_peers_;
};

}  // namespace brigade::transport
