// How role actors reach their peers on other nodes. Control messages go over CAF's middleman;
// data (activations to expert shards, KV blocks to decode workers) goes over the data plane
// through local proxies that cluster/ provides. In a single process no link is installed and
// every handle is used as it is.
#pragma once

#include "actors/decode_worker.hpp"
#include "actors/expert_shard.hpp"

namespace brigade::actors {

class remote_link {
 public:
  virtual ~remote_link() = default;

  /// The handle this process should send expert work to: `shard` itself when it is local,
  /// otherwise a local proxy that forwards over the data plane.
  virtual expert_shard_actor local_view(const expert_shard_actor& shard) = 0;
  /// Likewise for handing KV blocks to a decode worker.
  virtual decode_worker_actor local_view(const decode_worker_actor& worker) = 0;

  /// The link of this process, or null in a single-process topology.
  static remote_link* current();
  /// Installed once by a node (or coordinator) at start-up; null uninstalls.
  static void install(remote_link* link);
};

}  // namespace brigade::actors
