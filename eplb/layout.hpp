// Where every logical expert of every MoE layer lives: the physical expert slots of the shards.
//
// A layer has shards * slots_per_shard physical slots; slot p belongs to shard p / slots_per_shard.
// Every slot holds one logical expert (phy2log), every logical expert has at least one slot, and no
// shard holds two replicas of one expert (a second copy on the same shard adds no capacity).
// log2phy lists an expert's slots in ascending order. Plans assume a token routed to an expert
// with r replicas is spread evenly over them, so each replica carries 1/r of the expert's load;
// workers do better than that (eplb/replica_dispatch.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.hpp"

namespace brigade::eplb {

/// The dimensions a layout must have; used to check layouts read from files or peers.
struct layout_shape {
  int layers = 0;           ///< MoE layers.
  int experts = 0;          ///< Logical experts per layer.
  int shards = 0;           ///< Expert shards (one per GPU).
  int slots_per_shard = 0;  ///< Physical expert slots on each shard.

  int slots() const { return shards * slots_per_shard; }
  bool operator==(const layout_shape& o) const {
    return layers == o.layers && experts == o.experts && shards == o.shards &&
           slots_per_shard == o.slots_per_shard;
  }
  bool operator!=(const layout_shape& o) const { return !(*this == o); }
};

/// Checks that a shape can hold a valid layout: positive sizes, at least one slot per expert, and
/// no more slots on a shard than there are distinct experts.
status validate_layout_shape(const layout_shape& shape);

/// The slots of one logical expert, ascending; a view into its layout.
struct slot_list {
  const int32_t* first = nullptr;
  int count = 0;

  const int32_t* begin() const { return first; }
  const int32_t* end() const { return first + count; }
  int size() const { return count; }
  int32_t operator[](int i) const { return first[i]; }
};

/// An immutable, validated expert layout with both maps and the replica counts.
/// The one expert layout type: the planner's output, what the supervisor migrates to, and what
/// workers route with (over the model's MoE layers, in order: layer l here is the l-th MoE layer).
class layout {
 public:
  /// Bounds on what a layout may name, far above any model: a peer's layout beyond them is
  /// refused before anything is allocated for it.
  static constexpr int max_experts = 1 << 16;
  static constexpr long long max_slots = 1 << 20;

  /// An empty layout (no layers): a model without experts, or a layout not set yet.
  layout() = default;
  /// Builds a layout from phy2log ([layers][slots]), checking every invariant listed above.
  static result<layout> from_phy2log(const layout_shape& shape,
                                     std::vector<std::vector<int32_t>> phy2log, uint64_t epoch);

  const layout_shape& shape() const { return shape_; }
  int layers() const { return shape_.layers; }
  int experts() const { return shape_.experts; }
  int shards() const { return shape_.shards; }
  int slots_per_shard() const { return shape_.slots_per_shard; }
  int slots() const { return shape_.slots(); }
  /// Increases by one with every adopted plan, so peers can tell layouts apart.
  uint64_t epoch() const { return epoch_; }

  int shard_of(int slot) const { return slot / shape_.slots_per_shard; }
  /// The logical expert in a physical slot.
  int32_t logical(int layer, int slot) const { return phy2log_[layer][slot]; }
  const std::vector<int32_t>& phy2log(int layer) const { return phy2log_[layer]; }
  const std::vector<std::vector<int32_t>>& phy2log() const { return phy2log_; }
  /// The physical slots of a logical expert, ascending.
  slot_list log2phy(int layer, int expert) const;
  /// An even split by row index: row `token`'s call of `expert` goes to replica token % r. The
  /// split plans assume; workers dispatch with eplb::replica_dispatch instead.
  int32_t slot_for(int layer, int expert, int token) const {
    const slot_list slots = log2phy(layer, expert);
    return slots.first[token % slots.count];
  }
  int replica_count(int layer, int expert) const {
    return replica_count_[static_cast<size_t>(layer) * shape_.experts + expert];
  }
  /// The largest replica count of any expert in any layer (the width of a padded log2phy table).
  int max_replicas() const { return max_replicas_; }

 private:
  layout(layout_shape shape, std::vector<std::vector<int32_t>> phy2log, uint64_t epoch);

  layout_shape shape_;
  uint64_t epoch_ = 0;
  std::vector<std::vector<int32_t>> phy2log_;
  /// Per layer, the slots of expert e are log2phy_slots_[layer][offset[e] .. offset[e+1]).
  std::vector<std::vector<int32_t>> log2phy_offset_;
  std::vector<std::vector<int32_t>> log2phy_slots_;
  std::vector<int32_t> replica_count_;
  int max_replicas_ = 0;
};

/// Serialises a layout as one JSON object: shape, epoch, phy2log, log2phy and replica_count.
std::string layout_to_json(const layout& l);

/// Parses a layout from JSON text holding at least "phy2log"; shape fields present in the text
/// must match `expected`, and the layout must satisfy every invariant for that shape.
result<layout> layout_from_json(const std::string& text, const layout_shape& expected);

}  // namespace brigade::eplb
