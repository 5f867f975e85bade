// The working state of the planner for one layer: which expert each slot of each shard holds,
// every shard's load, and the checks that keep a placement legal. Internal to the planner and the
// baseline; the result leaves as a layout.
//
// Legal means: no shard holds an expert twice, and with node grouping (nodes > 1) no node holds
// more than ceil(r / nodes) replicas of an expert with r replicas, so that a hot expert's replicas
// and the traffic they draw are spread over the nodes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace brigade::eplb {

class shard_assignment {
 public:
  /// An empty assignment; `nodes` must divide `shards` (shards of a node are contiguous).
  shard_assignment(int experts, int shards, int slots_per_shard, int nodes);

  /// Sets the replica count of every expert and so each replica's load (load / count), and
  /// recomputes the shard loads of the slots already filled.
  void set_replicas(const double* expert_load, const int32_t* replica_count);
  /// Empties every slot.
  void clear();
  /// Fills the slots from a phy2log row (slot = shard * slots_per_shard + local).
  void assign_from(const int32_t* phy2log);

  int experts() const { return experts_; }
  int shards() const { return shards_; }
  int slots_per_shard() const { return slots_per_shard_; }
  int nodes() const { return nodes_; }
  int node_of(int shard) const { return shard / shards_per_node_; }

  int32_t expert_at(int shard, int local) const { return slot_expert_[slot(shard, local)]; }
  const std::vector<int32_t>& phy2log() const { return slot_expert_; }
  double load(int shard) const { return shard_load_[shard]; }
  double replica_load(int expert) const { return replica_load_[expert]; }
  int32_t replica_count(int expert) const { return replica_count_[expert]; }
  int filled(int shard) const { return filled_[shard]; }
  bool holds(int shard, int expert) const { return present_[presence(shard, expert)] != 0; }
  /// Replicas of `expert` on the shards of `node`.
  int node_replicas(int node, int expert) const { return node_replicas_[node_index(node, expert)]; }
  /// Whether another replica of `expert` may live on `node` without exceeding its node cap.
  bool node_allows(int node, int expert) const;
  /// Whether `expert` may be placed on `shard` now: a free slot, no copy there, node cap kept.
  bool fits(int shard, int expert) const;
  /// Whether the two slots may exchange experts without breaking a rule.
  bool can_swap(int shard_a, int local_a, int shard_b, int local_b) const;
  /// Whether every node cap holds (a layout made without node grouping may break them).
  bool node_caps_hold() const;

  /// Places `expert` in the first free slot of `shard`; the caller checked fits().
  void place(int shard, int expert);
  /// Empties one slot.
  void remove(int shard, int local);
  void swap(int shard_a, int local_a, int shard_b, int local_b);

  int busiest_shard() const;
  double total_load() const;

 private:
  std::size_t slot(int shard, int local) const {
    return static_cast<std::size_t>(shard) * slots_per_shard_ + local;
  }
  std::size_t presence(int shard, int expert) const {
    return static_cast<std::size_t>(shard) * experts_ + expert;
  }
  std::size_t node_index(int node, int expert) const {
    return static_cast<std::size_t>(node) * experts_ + expert;
  }
  void add(int shard, int local, int expert);

  int experts_;
  int shards_;
  int slots_per_shard_;
  int nodes_;
  int shards_per_node_;
  std::vector<int32_t> slot_expert_;    ///< [shards * slots_per_shard], -1 when empty.
  std::vector<double> shard_load_;      ///< [shards]
  std::vector<int32_t> filled_;         ///< [shards] slots in use.
  std::vector<uint8_t> present_;        ///< [shards * experts] 1 when the shard holds the expert.
  std::vector<int16_t> node_replicas_;  ///< [nodes * experts] replicas on each node.
  std::vector<int32_t> replica_count_;  ///< [experts]
  std::vector<int32_t> node_cap_;       ///< [experts] ceil(replica_count / nodes).
  std::vector<double> replica_load_;    ///< [experts] load / replica_count.
};

}  // namespace brigade::eplb
