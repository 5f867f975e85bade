// Where each logical expert lives: per MoE layer, physical slots spread over expert shards, a
// slot holding one logical expert (hot experts hold several slots: replicas). Versioned by an
// epoch that grows with every adopted re-plan.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "model/config.hpp"

namespace brigade::actors {

struct expert_layout {
  /// Bounds on what a layout may name, far above any model: a peer's layout beyond them is refused
  /// before anything is allocated for it.
  static constexpr int max_experts = 1 << 16;
  static constexpr int max_slots = 1 << 20;

  uint64_t epoch = 0;
  int shards = 0;
  int slots_per_shard = 0;
  int experts = 0;
  /// phy2log[layer][slot]: the logical expert in each physical slot (slot / slots_per_shard is
  /// its shard). Layers without experts have an empty list.
  std::vector<std::vector<int32_t>> phy2log;
  /// log2phy[layer][expert]: the slots holding each expert, in increasing order.
  std::vector<std::vector<std::vector<int32_t>>> log2phy;

  int shard_of(int slot) const { return slot / slots_per_shard; }
  /// The slot that serves `token`'s row for `expert`: replicas take tokens in turn.
  int32_t slot_for(int layer, int expert, int token) const;
  /// Rebuilds log2phy from phy2log.
  void index();
  /// Every expert has a slot, every slot an existing expert, no expert twice on one shard. Safe on
  /// any values (a layout from a peer is checked before it is indexed).
  status check() const;
  /// check(), and the layout's layers and experts are the model's: MoE layers have slots, the
  /// others none.
  status fits(const model::model_config& c) const;

  /// Experts in order, slot by slot; spare slots hold replicas of experts 0, 1, ... placed so
  /// that no shard holds two copies of one expert.
  static result<expert_layout> initial(const model::model_config& c, int shards,
                                       int slots_per_shard);
};

}  // namespace brigade::actors
