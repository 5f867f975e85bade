// Which replica serves each routed row of a step.
//
// A row routed to an expert with r replicas may go to any of them: replicas hold the same
// weights and an expert FFN's row never depends on the rows beside it, so every choice gives the
// same bits. The plan assumes the replicas share their expert's rows evenly. A worker does better
// by filling in: the rows of unreplicated experts land where they must, and each row of a
// replicated expert goes to the replica whose shard this worker has loaded least lately in that
// layer (this step's rows included). So
//   - small decode batches do not pile onto the first replica (an even split by row index sends
//     a batch of one to replica 0 every step);
//   - when the load drifts away from what the layout was planned for, the replicated experts'
//     rows still level the shards until the next plan catches up.
// "Lately" is a history that halves every `half_life_steps` layer dispatches, so a shard that
// was busy long ago is not starved of rows now.
#pragma once

#include <cstdint>
#include <vector>

#include "eplb/layout.hpp"

namespace brigade::eplb {

class replica_dispatch {
 public:
  explicit replica_dispatch(double half_life_steps = 16.0);

  /// Chooses the physical slot of each of `count` rows of layout layer `layer`, whose experts are
  /// `experts[i]`, into `slots[i]`; counts them in the history. A layout of another epoch than the
  /// last one starts the history afresh: what loaded a shard under the old layout says nothing
  /// of what will under the new one.
  void assign(const layout& l, int layer, const int32_t* experts, int count, int32_t* slots);

  /// This worker's recent rows on each shard of `layer` (decayed), for tests.
  std::vector<double> recent_load(int layer) const;

 private:
  void fit(const layout& l);

  double decay_;
  layout_shape shape_;
  uint64_t epoch_ = 0;
  std::vector<double> load_;  // [layers * shards]
};

}  // namespace brigade::eplb
