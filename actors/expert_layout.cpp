#include "actors/expert_layout.hpp"

#include <algorithm>
#include <set>

namespace brigade::actors {

int32_t expert_layout::slot_for(int layer, int expert, int token) const {
  const auto& slots = log2phy[static_cast<size_t>(layer)][static_cast<size_t>(expert)];
  return slots[static_cast<size_t>(token) % slots.size()];
}

void expert_layout::index() {
  log2phy.assign(phy2log.size(), {});
  for (size_t l = 0; l < phy2log.size(); ++l) {
    if (phy2log[l].empty()) continue;
    log2phy[l].assign(static_cast<size_t>(experts), {});
    for (size_t slot = 0; slot < phy2log[l].size(); ++slot) {
      log2phy[l][static_cast<size_t>(phy2log[l][slot])].push_back(static_cast<int32_t>(slot));
    }
  }
}

status expert_layout::check() const {
  const bool any_slots =
      std::any_of(phy2log.begin(), phy2log.end(), [](const auto& layer) { return !layer.empty(); });
  if (!any_slots) return ok_status();  // a model without MoE layers routes nothing
  if (shards < 1 || slots_per_shard < 1 || experts < 1 || experts > max_experts ||
      static_cast<int64_t>(shards) * slots_per_shard > max_slots) {
    return error(errc::invalid_argument, "a layout of " + std::to_string(shards) + " shards of " +
                                             std::to_string(slots_per_shard) + " slots for " +
                                             std::to_string(experts) + " experts is impossible");
  }
  const size_t slots = static_cast<size_t>(shards) * static_cast<size_t>(slots_per_shard);
  for (size_t l = 0; l < phy2log.size(); ++l) {
    if (phy2log[l].empty()) continue;
    if (phy2log[l].size() != slots) {
      return error(errc::invalid_argument, "layer " + std::to_string(l) + " has " +
                                               std::to_string(phy2log[l].size()) +
                                               " slots, expected " + std::to_string(slots));
    }
    std::vector<std::set<int32_t>> per_shard(static_cast<size_t>(shards));
    std::vector<int> copies(static_cast<size_t>(experts), 0);
    for (size_t slot = 0; slot < phy2log[l].size(); ++slot) {
      const int32_t e = phy2log[l][slot];
      if (e < 0 || e >= experts) {
        return error(errc::invalid_argument, "layer " + std::to_string(l) + " slot " +
                                                 std::to_string(slot) + " holds expert " +
                                                 std::to_string(e));
      }
      if (!per_shard[static_cast<size_t>(shard_of(static_cast<int>(slot)))].insert(e).second) {
        return error(errc::invalid_argument, "layer " + std::to_string(l) + ": expert " +
                                                 std::to_string(e) + " twice on one shard");
      }
      ++copies[static_cast<size_t>(e)];
    }
    for (int e = 0; e < experts; ++e) {
      if (copies[static_cast<size_t>(e)] == 0) {
        return error(errc::invalid_argument, "layer " + std::to_string(l) + ": expert " +
                                                 std::to_string(e) + " has no slot");
      }
    }
  }
  return ok_status();
}

status expert_layout::fits(const model::model_config& c) const {
  if (status ok = check(); !ok) return ok;
  if (phy2log.size() != static_cast<size_t>(c.num_layers)) {
    return error(errc::invalid_argument, "the layout has " + std::to_string(phy2log.size()) +
                                             " layers but the model " +
                                             std::to_string(c.num_layers));
  }
  for (int l = 0; l < c.num_layers; ++l) {
    const bool moe = c.is_moe_layer(l);
    if (phy2log[static_cast<size_t>(l)].empty() == moe) {
      return error(errc::invalid_argument, "layer " + std::to_string(l) +
                                               (moe ? " has experts in the model but no slots"
                                                    : " has no experts in the model but slots") +
                                               " in the layout");
    }
  }
  if (c.is_moe() && experts != c.num_experts) {
    return error(errc::invalid_argument, "the layout places " + std::to_string(experts) +
                                             " experts per layer but the model has " +
                                             std::to_string(c.num_experts));
  }
  return ok_status();
}

result<expert_layout> expert_layout::initial(const model::model_config& c, int shards,
                                             int slots_per_shard) {
  expert_layout layout;
  layout.shards = shards;
  layout.experts = c.num_experts;
  layout.slots_per_shard =
      slots_per_shard > 0 ? slots_per_shard : (c.num_experts + shards - 1) / shards;
  const int slots = layout.shards * layout.slots_per_shard;
  if (slots < c.num_experts) {
    return error(errc::invalid_argument,
                 std::to_string(shards) + " expert shards of " +
                     std::to_string(layout.slots_per_shard) + " slots hold " +
                     std::to_string(slots) + " experts but the model has " +
                     std::to_string(c.num_experts) + " per layer: raise slots_per_shard");
  }
  if (layout.slots_per_shard > c.num_experts) {
    return error(errc::invalid_argument,
                 "slots_per_shard (" + std::to_string(layout.slots_per_shard) +
                     ") exceeds the number of experts (" + std::to_string(c.num_experts) +
                     "): a shard cannot hold two copies of one expert");
  }
  layout.phy2log.assign(static_cast<size_t>(c.num_layers), {});
  for (int l = 0; l < c.num_layers; ++l) {
    if (!c.is_moe_layer(l)) continue;
    auto& map = layout.phy2log[static_cast<size_t>(l)];
    map.resize(static_cast<size_t>(slots));
    // Slot s holds expert s mod E: copies of one expert are E slots apart, and E >= slots per
    // shard, so they never share a shard.
    for (int s = 0; s < slots; ++s)
      map[static_cast<size_t>(s)] = s % c.num_experts;
  }
  layout.index();
  status ok = layout.check();
  if (!ok) return ok.err();
  return layout;
}

}  // namespace brigade::actors
