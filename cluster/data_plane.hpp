// A process's data plane: the UCX transport of this node, local proxies that carry activations
// and KV blocks to expert shards and decode workers on other nodes, and the ingress that hands
// what arrives to the local actors. Control messages never come here: they go over CAF.
//
//   worker --expert_request--> shard proxy --UCX expert_call--> ingress --> expert shard
//   worker <--expert_reply---- shard proxy <--UCX expert_answer-- ingress <-----'
//
// When the control plane declares a peer dead (peer_down), or UCX detects it, every call in
// flight to that peer fails at once, and the workers re-route or wait for the supervisor.
#pragma once

#include <caf/node_id.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "actors/remote_link.hpp"
#include "common/result.hpp"
#include "transport/transport_config.hpp"

namespace brigade::cluster {

/// A peer node of the data plane, as the coordinator announces it.
struct peer_entry {
  uint64_t id = 0;                 ///< The peer's transport id.
  std::string name;                ///< Node name, for messages.
  caf::node_id node;               ///< Its actor system: whose handles live there.
  std::vector<std::byte> address;  ///< Its transport address bytes.
};

class data_plane final : public actors::remote_link {
 public:
  /// Starts the node's transport and ingress.
  static result<std::unique_ptr<data_plane>> start(caf::actor_system& sys,
                                                   const transport::transport_config& config);
  ~data_plane() override;
  data_plane(const data_plane&) = delete;
  data_plane& operator=(const data_plane&) = delete;

  uint64_t self() const;
  /// The bytes peers connect with; the control plane carries them.
  std::vector<std::byte> address() const;
  /// Connects to a peer (again, after it came back).
  status add_peer(const peer_entry& peer);
  /// The control plane's verdict that `peer` is gone: every call to it fails now.
  void peer_down(uint64_t peer, const std::string& why);
  /// The coordinator's whole list of peers: any other peer known here is gone (a node restarted
  /// under a new id, or declared down while this node was out of contact).
  void retain_peers(const std::vector<uint64_t>& peers);
  /// An actor of this node that peers may send data to (expert shards, decode workers).
  void register_local(const caf::actor& actor);

  actors::expert_shard_actor local_view(const actors::expert_shard_actor& shard) override;
  actors::decode_worker_actor local_view(const actors::decode_worker_actor& worker) override;

  struct impl;

 private:
  explicit data_plane(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace brigade::cluster
