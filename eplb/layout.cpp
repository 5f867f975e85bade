#include "eplb/layout.hpp"

#include <algorithm>
#include <utility>

namespace brigade::eplb {

namespace {

std::string where(int layer, int slot) {
  return "layer " + std::to_string(layer) + " slot " + std::to_string(slot);
}

/// Checks one layer's phy2log: size, expert range, no duplicate on a shard, every expert present.
status validate_layer(const layout_shape& shape, int layer, const std::vector<int32_t>& phy2log) {
  if (static_cast<int>(phy2log.size()) != shape.slots()) {
    return error(errc::invalid_argument,
                 "phy2log of layer " + std::to_string(layer) + " has " +
                     std::to_string(phy2log.size()) + " slots; the shape needs " +
                     std::to_string(shape.slots()) + " (shards * slots per shard)");
  }
  std::vector<int> last_shard(shape.experts, -1);
  for (int slot = 0; slot < shape.slots(); ++slot) {
    const int32_t expert = phy2log[slot];
    if (expert < 0 || expert >= shape.experts) {
      return error(errc::invalid_argument, where(layer, slot) + " holds expert " +
                                               std::to_string(expert) + ", outside [0, " +
                                               std::to_string(shape.experts) + ")");
    }
    const int shard = slot / shape.slots_per_shard;
    if (last_shard[expert] == shard) {
      return error(errc::invalid_argument, where(layer, slot) + ": expert " +
                                               std::to_string(expert) + " appears twice on shard " +
                                               std::to_string(shard));
    }
    last_shard[expert] = shard;
  }
  for (int expert = 0; expert < shape.experts; ++expert) {
    if (last_shard[expert] < 0) {
      return error(errc::invalid_argument, "layer " + std::to_string(layer) + ": expert " +
                                               std::to_string(expert) + " has no slot");
    }
  }
  return ok_status();
}

}  // namespace

status validate_layout_shape(const layout_shape& shape) {
  if (shape.layers <= 0 || shape.experts <= 0 || shape.shards <= 0 || shape.slots_per_shard <= 0) {
    return error(errc::invalid_argument,
                 "layout needs positive layers, experts, shards and slots per shard (got " +
                     std::to_string(shape.layers) + ", " + std::to_string(shape.experts) + ", " +
                     std::to_string(shape.shards) + ", " + std::to_string(shape.slots_per_shard) +
                     ")");
  }
  if (shape.experts > layout::max_experts ||
      static_cast<long long>(shape.shards) * shape.slots_per_shard > layout::max_slots) {
    return error(errc::invalid_argument, "a layout of " + std::to_string(shape.shards) +
                                             " shards of " + std::to_string(shape.slots_per_shard) +
                                             " slots for " + std::to_string(shape.experts) +
                                             " experts is past any model");
  }
  if (static_cast<long long>(shape.shards) * shape.slots_per_shard < shape.experts) {
    return error(errc::invalid_argument,
                 std::to_string(shape.shards) + " shards x " +
                     std::to_string(shape.slots_per_shard) + " slots = " +
                     std::to_string(static_cast<long long>(shape.shards) * shape.slots_per_shard) +
                     " slots cannot hold " + std::to_string(shape.experts) +
                     " experts: add shards or slots per shard");
  }
  if (shape.slots_per_shard > shape.experts) {
    return error(errc::invalid_argument,
                 std::to_string(shape.slots_per_shard) + " slots per shard exceed the " +
                     std::to_string(shape.experts) +
                     " experts, and a shard may not hold two replicas of one expert");
  }
  return ok_status();
}

result<layout> layout::from_phy2log(const layout_shape& shape,
                                    std::vector<std::vector<int32_t>> phy2log, uint64_t epoch) {
  if (status s = validate_layout_shape(shape); !s) return s.err();
  if (static_cast<int>(phy2log.size()) != shape.layers) {
    return error(errc::invalid_argument, "phy2log has " + std::to_string(phy2log.size()) +
                                             " layers; the shape needs " +
                                             std::to_string(shape.layers));
  }
  for (int layer = 0; layer < shape.layers; ++layer) {
    if (status s = validate_layer(shape, layer, phy2log[layer]); !s) return s.err();
  }
  return layout(shape, std::move(phy2log), epoch);
}

layout::layout(layout_shape shape, std::vector<std::vector<int32_t>> phy2log, uint64_t epoch)
    : shape_(shape), epoch_(epoch), phy2log_(std::move(phy2log)) {
  const int experts = shape_.experts;
  replica_count_.assign(static_cast<size_t>(shape_.layers) * experts, 0);
  log2phy_offset_.resize(shape_.layers);
  log2phy_slots_.resize(shape_.layers);
  for (int layer = 0; layer < shape_.layers; ++layer) {
    int32_t* count = &replica_count_[static_cast<size_t>(layer) * experts];
    for (int32_t expert : phy2log_[layer])
      ++count[expert];
    auto& offset = log2phy_offset_[layer];
    offset.assign(experts + 1, 0);
    for (int e = 0; e < experts; ++e) {
      offset[e + 1] = offset[e] + count[e];
      max_replicas_ = std::max(max_replicas_, static_cast<int>(count[e]));
    }
    // Slots are visited in ascending order, so each expert's list comes out sorted.
    std::vector<int32_t> next(offset.begin(), offset.end() - 1);
    auto& slots = log2phy_slots_[layer];
    slots.assign(shape_.slots(), 0);
    for (int slot = 0; slot < shape_.slots(); ++slot)
      slots[next[phy2log_[layer][slot]]++] = slot;
  }
}

slot_list layout::log2phy(int layer, int expert) const {
  const auto& offset = log2phy_offset_[layer];
  return slot_list{log2phy_slots_[layer].data() + offset[expert],
                   offset[expert + 1] - offset[expert]};
}

}  // namespace brigade::eplb
