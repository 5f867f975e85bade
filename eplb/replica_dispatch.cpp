#include "eplb/replica_dispatch.hpp"

#include <cmath>
#include <cstddef>

namespace brigade::eplb {

replica_dispatch::replica_dispatch(double half_life_steps)
    : decay_(half_life_steps > 0 ? std::exp2(-1.0 / half_life_steps) : 0.0) {}

void replica_dispatch::fit(const layout& l) {
  if (l.shape() == shape_ && l.epoch() == epoch_ && !load_.empty()) return;
  shape_ = l.shape();
  epoch_ = l.epoch();
  load_.assign(static_cast<size_t>(shape_.layers) * static_cast<size_t>(shape_.shards), 0.0);
}

void replica_dispatch::assign(const layout& l, int layer, const int32_t* experts, int count,
                              int32_t* slots) {
  fit(l);
  double* load = load_.data() + static_cast<size_t>(layer) * static_cast<size_t>(shape_.shards);
  for (int s = 0; s < shape_.shards; ++s)
    load[s] *= decay_;
  // Rows with one place to go first, so the others fill in around them.
  for (int i = 0; i < count; ++i) {
    const slot_list replicas = l.log2phy(layer, experts[i]);
    slots[i] = -1;
    if (replicas.size() != 1) continue;
    slots[i] = replicas[0];
    load[l.shard_of(replicas[0])] += 1.0;
  }
  for (int i = 0; i < count; ++i) {
    if (slots[i] >= 0) continue;
    const slot_list replicas = l.log2phy(layer, experts[i]);
    int32_t best = replicas[0];
    for (int32_t slot : replicas) {
      // Ties go to the lowest slot, so the choice is the same on every run.
      if (load[l.shard_of(slot)] < load[l.shard_of(best)]) best = slot;
    }
    slots[i] = best;
    load[l.shard_of(best)] += 1.0;
  }
}

std::vector<double> replica_dispatch::recent_load(int layer) const {
  if (layer < 0 || layer >= shape_.layers) return {};
  const auto first = load_.begin() + static_cast<std::ptrdiff_t>(layer) * shape_.shards;
  return {first, first + shape_.shards};
}

}  // namespace brigade::eplb
