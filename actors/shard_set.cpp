#include "actors/shard_set.hpp"

namespace brigade::actors {

status check_layout(const eplb::layout& layout, const model::model_config& model) {
  const int moe_layers = static_cast<int>(model.moe_layers().size());
  if (layout.layers() != moe_layers) {
    return error(errc::invalid_argument,
                 "the layout places experts in " + std::to_string(layout.layers()) +
                     " layers but the model has " + std::to_string(moe_layers) + " MoE layers");
  }
  if (moe_layers > 0 && layout.experts() != model.num_experts) {
    return error(errc::invalid_argument, "the layout places " + std::to_string(layout.experts()) +
                                             " experts per layer but the model has " +
                                             std::to_string(model.num_experts));
  }
  return ok_status();
}

status check_shards(const shard_set& set, const model::model_config& model) {
  if (status fits = check_layout(set.layout, model); !fits) return fits;
  if (set.shards.size() == static_cast<size_t>(set.layout.shards())) return ok_status();
  return error(errc::invalid_argument, "the shard set names " + std::to_string(set.shards.size()) +
                                           " shards for a layout of " +
                                           std::to_string(set.layout.shards()));
}

int default_slots_per_shard(int experts, int shards) {
  // A quarter more slots than experts, rounded up to whole shards: room for replicas of the hot
  // experts, which is what lets the planner even out a skewed load (docs/balance.md).
  const int n = std::max(1, shards);
  const int slots = (experts * 5 + 3) / 4;
  return std::min(experts, (slots + n - 1) / n);
}

result<eplb::layout> initial_layout(const model::model_config& model, int shards,
                                    int slots_per_shard) {
  eplb::layout_shape shape;
  shape.layers = static_cast<int>(model.moe_layers().size());
  shape.experts = model.num_experts;
  shape.shards = shards;
  shape.slots_per_shard =
      slots_per_shard > 0 ? slots_per_shard : default_slots_per_shard(model.num_experts, shards);
  const long long slots = static_cast<long long>(shape.shards) * shape.slots_per_shard;
  if (slots < model.num_experts) {
    return error(errc::invalid_argument,
                 std::to_string(shards) + " expert shards of " +
                     std::to_string(shape.slots_per_shard) + " slots hold " +
                     std::to_string(slots) + " experts but the model has " +
                     std::to_string(model.num_experts) + " per layer: raise slots_per_shard");
  }
  if (shape.slots_per_shard > model.num_experts) {
    return error(errc::invalid_argument,
                 "slots_per_shard (" + std::to_string(shape.slots_per_shard) +
                     ") exceeds the number of experts (" + std::to_string(model.num_experts) +
                     "): a shard cannot hold two copies of one expert");
  }
  // Slot s holds expert s mod E: copies of one expert are E slots apart, and E >= slots per
  // shard, so they never share a shard.
  std::vector<int32_t> map(static_cast<size_t>(slots));
  for (long long s = 0; s < slots; ++s)
    map[static_cast<size_t>(s)] = static_cast<int32_t>(s % model.num_experts);
  return eplb::layout::from_phy2log(
      shape, std::vector<std::vector<int32_t>>(static_cast<size_t>(shape.layers), map), 0);
}

}  // namespace brigade::actors
