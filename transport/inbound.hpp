// The receiving half of a node's transport: decodes frames, drops what must be dropped
// (malformed, unknown channel, departed sender, severed link, duplicates), lands large
// payloads by rendezvous straight into the channel's buffer, and delivers every message to its
// channel handler. Used only on the progress thread.
//
// Life of a message:
//
//   UCX callback ──> eager: copied into a channel buffer ───────────────┐
//        │                                                              ├──> handler (after
//        └──> rendezvous: receive into a channel buffer starts at once ─┘     progress)
//                                   │
//                                   └──> sender departed/failed: error handler now;
//                                        UCX releases the receive later
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include <ucp/api/ucp.h>

#include "common/result.hpp"
#include "transport/channel_options.hpp"
#include "transport/intrusive_list.hpp"
#include "transport/payload_arena.hpp"
#include "transport/registration_cache.hpp"
#include "transport/sequence_window.hpp"
#include "transport/transport_config.hpp"
#include "transport/transport_stats.hpp"

namespace brigade::transport {

class inbound {
 public:
  inbound(ucp_worker_h worker, const transport_config& config, registration_cache& registrations,
          stats_counters& stats);
  /// Frees what is left; the UCX worker must already be destroyed (no more callbacks).
  ~inbound();
  inbound(const inbound&) = delete;
  inbound& operator=(const inbound&) = delete;

  /// Registers the active-message handler with the worker.
  status install();
  /// Sets (or replaces) what happens to messages on `channel`.
  void open_channel(channel_id channel, channel_options options);

  /// Delivers every complete message to its channel (and reports failed receives); true if
  /// anything happened.
  bool after_progress();

  /// Stops accepting messages from `peer`: its in-flight receives fail with
  /// `why` now, and messages that still arrive from it are dropped.
  void depart(peer_id peer, const error& why);
  /// Shutdown, last step before the worker is destroyed: hands every request UCX still holds
  /// back to it (no callback follows).
  void release_requests();
  /// Accepts messages from `peer` again (it was connected anew) with fresh sequence numbers.
  void admit(peer_id peer);

 private:
  struct receive;
  struct channel_state {
    channel_options options;
    /// Per-sender duplicate detection, when the channel asks for it.
    std::unordered_map<peer_id, sequence_window> windows;
  };
  /// A message ready for its handler, or a receive that failed and must be reported. Its header
  /// bytes live in the batch's header arena, so an eager message costs no allocation of its own.
  struct delivery {
    peer_id from = 0;
    channel_id channel = 0;
    std::uint64_t sequence = 0;
    std::size_t header_offset = 0;
    std::size_t header_bytes = 0;
    byte_buffer payload;
    status outcome;
    /// The channel, when known at arrival (entries of channels_ never move or go away).
    channel_state* state = nullptr;
  };
  /// Deliveries in arrival order and the header bytes they point into.
  struct delivery_batch {
    std::vector<delivery> deliveries;
    std::vector<std::byte> headers;
    delivery& add(peer_id from, channel_id channel, std::uint64_t sequence, const std::byte* header,
                  std::size_t header_bytes);
    void clear() {
      deliveries.clear();
      headers.clear();
    }
  };

  static ucs_status_t on_active_message(void* arg, const void* header, size_t header_length,
                                        void* data, size_t length,
                                        const ucp_am_recv_param_t* param);
  static void on_receive_done(void* request, ucs_status_t status, size_t length, void* user_data);

  ucs_status_t handle_message(const void* header, size_t header_length, void* data, size_t length,
                              const ucp_am_recv_param_t* param);
  result<byte_buffer> allocate(channel_id id, channel_state& channel, peer_id from, size_t bytes);
  /// Starts receiving an announced rendezvous payload into a buffer from the channel's
  /// allocator; returns what the active-message callback must return.
  ucs_status_t start_rendezvous(channel_state& channel, std::unique_ptr<receive> r,
                                void* descriptor);
  /// Moves a finished rendezvous receive into the ready batch.
  void finish_rendezvous(std::unique_ptr<receive> r, status outcome);
  void deliver(delivery& d, const std::vector<std::byte>& headers);
  void report_failure(peer_id from, channel_id channel, const error& why);
  bool departed(peer_id peer) const { return !departed_.empty() && departed_.count(peer) != 0; }
  void remember_departure(peer_id peer);

  ucp_worker_h worker_;
  const transport_config& config_;
  registration_cache& registrations_;
  stats_counters& stats_;
  std::unordered_map<channel_id, channel_state> channels_;
  /// Departed peers and the number of their latest departure.
  std::unordered_map<peer_id, std::uint64_t> departed_;
  /// Departures in order, so the set stays within config.max_departed_peers.
  std::deque<std::pair<peer_id, std::uint64_t>> departure_order_;
  std::uint64_t departures_ = 0;
  /// Where payloads of channels without their own allocator land.
  payload_arena arena_;
  /// Messages complete and waiting for their handler; handlers run on a swapped-out batch.
  delivery_batch ready_;
  delivery_batch delivering_;
  /// Rendezvous receives in UCX's hands, per sender.
  std::unordered_map<peer_id, intrusive_list<receive>> in_flight_;
  /// Receives that already failed but UCX still holds.
  intrusive_list<receive> orphans_;
};

}  // namespace brigade::transport
