// Which expert weights the shards of this process hold, so that a shard taking on an expert a
// peer here holds already shares it at once, without a message to the peer. Within one process
// every shard computes on the same device (model_context::dev), so a new slot shares the weights
// in memory. Asking the holder instead (shard -> loader -> holder -> loader -> shard) woke four
// threads per expert beside serving: the steps overlapping a migration were 1.061x their local
// median that way and 1.025x with the index (bench balance, one process, five alternated pairs).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "model/weights.hpp"

namespace brigade::actors {

class expert_share_index {
 public:
  /// Records that a shard holds these weights for expert `expert` of `layer`. Entries are weak:
  /// the index never keeps weights alive that no shard holds. Every copy is kept (replicas loaded
  /// apart are distinct copies), so that the expert is found while any of them lives.
  void publish(int32_t layer, int32_t expert,
               const std::shared_ptr<const model::ffn_weights>& weights);

  /// The weights of (layer, expert) some shard of this process still holds, or null.
  std::shared_ptr<const model::ffn_weights> find(int32_t layer, int32_t expert) const;

 private:
  mutable std::mutex mutex_;
  /// Bounded by the copies alive: at most one per shard holding the expert, once expired ones go.
  std::map<std::pair<int32_t, int32_t>, std::vector<std::weak_ptr<const model::ffn_weights>>>
      entries_;
};

}  // namespace brigade::actors
