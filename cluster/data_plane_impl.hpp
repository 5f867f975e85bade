// The data plane's shared state and the messages between its progress thread, its proxies and
// its ingress. Private to cluster/data_plane*.cpp.
#pragma once

#include <caf/all.hpp>

#include <atomic>
#include <map>
#include <mutex>
#include <set>

#include "cluster/data_plane.hpp"
#include "cluster/wire.hpp"
#include "transport/node_transport.hpp"

namespace brigade::cluster {

/// An expert call that arrived for a local shard.
struct expert_call_in {
  uint64_t from = 0;
  wire::expert_call_header header;
  transport::byte_buffer payload;
};

/// A KV handoff that arrived (meta and blocks) for a local decode worker.
struct kv_call_in {
  uint64_t from = 0;
  uint64_t correlation = 0;
  uint64_t target = 0;
  actors::kv_handoff handoff;
};

/// A request for an expert's weights that arrived for a local shard.
struct weights_call_in {
  uint64_t from = 0;
  wire::weights_call_header header;
};

/// Weights (or a refusal) that arrived for a proxy's call.
struct weights_answer_in {
  wire::weights_answer_header header;
  transport::byte_buffer payload;
};

/// The answer to a call a proxy made.
struct answer_in {
  wire::answer_header header;
  transport::byte_buffer payload;
};

/// A call a proxy made that can no longer be answered (send failed, peer gone).
struct call_failed {
  uint64_t correlation = 0;
  std::string why;
};

struct data_plane::impl {
  caf::actor_system* sys = nullptr;
  std::unique_ptr<transport::node_transport> net;
  caf::actor ingress;
  std::atomic<uint64_t> next_correlation{1};

  std::mutex mutex;  // guards everything below
  std::map<caf::node_id, uint64_t> peer_of_node;
  /// Set before the transport stops: its last failure reports must not make links again.
  std::atomic<bool> stopping{false};
  std::set<uint64_t> connected;  // peers with an endpoint (not disconnected since)
  // Every peer's address, to connect again after a link failure; peers the control plane
  // declared down are not, until it announces them again.
  std::map<uint64_t, std::vector<std::byte>> addresses;
  std::set<uint64_t> declared_down;
  std::map<caf::actor_id, caf::actor> locals;
  std::map<std::pair<caf::node_id, caf::actor_id>, caf::actor> proxies;
  struct pending_call {
    uint64_t peer = 0;
    caf::actor proxy;
  };
  std::map<uint64_t, pending_call> pending;
  struct kv_parts {
    std::optional<wire::kv_meta_header> meta;
    transport::byte_buffer tokens;
    std::optional<transport::byte_buffer> blocks;
    uint64_t from = 0;
  };
  std::map<std::pair<uint64_t, uint64_t>, kv_parts> kv_assembly;  // (peer, correlation)

  /// Registers a call before sending; the answer goes to `proxy`.
  uint64_t track(uint64_t peer, const caf::actor& proxy);
  /// The proxy waiting for `correlation`, removed from the pending calls.
  caf::actor untrack(uint64_t correlation);
  /// Fails one call (its proxy gets call_failed).
  void fail(uint64_t correlation, const std::string& why);
  /// Fails every call to `peer`.
  void fail_peer(uint64_t peer, const std::string& why);
  std::optional<uint64_t> peer_for(const caf::node_id& node);
  caf::actor local(caf::actor_id id);
  void forget_proxy(const caf::node_id& node, caf::actor_id id);
  /// Sends `header` and `payload`; a failed send fails the call.
  void send_call(uint64_t peer, transport::channel_id channel, transport::byte_view header,
                 transport::byte_buffer payload, uint64_t correlation);
  /// Sends on a link, connecting it again first when it failed since (a reset TCP connection,
  /// a node that was out of contact and is back) and the control plane has not declared the
  /// peer down.
  status send(uint64_t peer, transport::channel_id channel, transport::byte_view header,
              transport::byte_buffer payload, transport::completion_handler done = {});
  /// A link that failed a send: it is disconnected, and connected again on the next send.
  void forget_link(uint64_t peer, const error& why);
  /// Connects `peer` again unless it is connected, declared down or unknown.
  void relink(uint64_t peer);
};

/// A byte buffer that owns `values` without copying them.
transport::byte_buffer floats_buffer(std::vector<float>&& values);
/// A byte buffer over memory `owner` keeps alive.
transport::byte_buffer alias_buffer(const std::shared_ptr<const float>& owner, size_t floats);

caf::behavior ingress_behavior(caf::event_based_actor* self, data_plane::impl* dp);
caf::actor spawn_shard_proxy(caf::actor_system& sys, data_plane::impl* dp,
                             actors::expert_shard_actor remote, uint64_t peer);
caf::actor spawn_decode_proxy(caf::actor_system& sys, data_plane::impl* dp,
                              actors::decode_worker_actor remote, uint64_t peer);

}  // namespace brigade::cluster

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(brigade::cluster::expert_call_in)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(brigade::cluster::kv_call_in)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(brigade::cluster::answer_in)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(brigade::cluster::call_failed)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(brigade::cluster::weights_call_in)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(brigade::cluster::weights_answer_in)
