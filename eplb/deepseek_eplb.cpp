#include "eplb/deepseek_eplb.hpp"

#include <algorithm>
#include <numeric>
#include <utility>
#include <vector>

#include "eplb/planner.hpp"

namespace brigade::eplb {

namespace {

/// Replica counts: one each, then every further slot to the highest load per replica.
std::vector<int> replicate(const std::vector<double>& load, int slots, int max_per_expert) {
  std::vector<int> counts(load.size(), 1);
  for (int extra = slots - static_cast<int>(load.size()); extra > 0; --extra) {
    int best = -1;
    for (size_t e = 0; e < load.size(); ++e) {
      if (counts[e] >= max_per_expert) continue;
      if (best < 0 || load[e] / counts[e] > load[best] / counts[best]) best = static_cast<int>(e);
    }
    ++counts[best];
  }
  return counts;
}

/// Bins of equal capacity filled heaviest item first, each to the lightest bin with room that
/// does not hold the item's expert yet.
class balanced_packer {
 public:
  balanced_packer(int bins, int capacity) : capacity_(capacity), load_(bins, 0.0), items_(bins) {
    for (auto& b : items_)
      b.reserve(capacity);
  }

  /// Packs items (expert, weight); false when an item finds no legal bin even after a repair.
  bool pack(std::vector<std::pair<int, double>> items) {
    std::stable_sort(items.begin(), items.end(),
                     [](const auto& x, const auto& y) { return x.second > y.second; });
    for (const auto& item : items) {
      if (!place(item)) return false;
    }
    return true;
  }

  const std::vector<std::pair<int, double>>& bin(int b) const { return items_[b]; }

 private:
  bool holds(int b, int expert) const {
    return std::any_of(items_[b].begin(), items_[b].end(),
                       [&](const auto& it) { return it.first == expert; });
  }
  bool room(int b) const { return static_cast<int>(items_[b].size()) < capacity_; }
  void put(int b, std::pair<int, double> item) {
    load_[b] += item.second;
    items_[b].push_back(item);
  }

  bool place(const std::pair<int, double>& item) {
    const int bins = static_cast<int>(load_.size());
    int best = -1;
    for (int b = 0; b < bins; ++b) {
      if (room(b) && !holds(b, item.first) && (best < 0 || load_[b] < load_[best])) best = b;
    }
    if (best >= 0) return put(best, item), true;
    // Every bin with room holds this expert: move another item from a full bin into one of them.
    for (int full = 0; full < bins; ++full) {
      if (room(full) || holds(full, item.first)) continue;
      for (size_t i = 0; i < items_[full].size(); ++i) {
        const auto moving = items_[full][i];
        for (int free = 0; free < bins; ++free) {
          if (!room(free) || holds(free, moving.first)) continue;
          load_[full] -= moving.second;
          items_[full].erase(items_[full].begin() + static_cast<long>(i));
          put(free, moving);
          put(full, item);
          return true;
        }
      }
    }
    return false;
  }

  int capacity_;
  std::vector<double> load_;
  std::vector<std::vector<std::pair<int, double>>> items_;
};

/// Replicates `experts` (ids into `load`) into `slots` and packs them onto `shards` shards
/// starting at `first_shard` of `row`.
bool replicate_and_pack(const std::vector<double>& load, const std::vector<int>& experts,
                        int first_shard, int shards, int k, std::vector<int32_t>& row) {
  std::vector<double> local_load;
  for (int e : experts)
    local_load.push_back(load[e]);
  const std::vector<int> counts = replicate(local_load, shards * k, shards);
  std::vector<std::pair<int, double>> items;
  for (size_t i = 0; i < experts.size(); ++i) {
    for (int r = 0; r < counts[i]; ++r)
      items.emplace_back(experts[i], local_load[i] / counts[i]);
  }
  balanced_packer packer(shards, k);
  if (!packer.pack(std::move(items))) return false;
  for (int s = 0; s < shards; ++s) {
    for (int i = 0; i < k; ++i)
      row[(first_shard + s) * k + i] = packer.bin(s)[i].first;
  }
  return true;
}

/// One layer under the hierarchical policy with `groups` groups of contiguous experts; false
/// when its preconditions do not hold.
bool plan_hierarchical(const std::vector<double>& load, int shards, int k, int nodes, int groups,
                       std::vector<int32_t>& row) {
  const int experts = static_cast<int>(load.size());
  const int per_node = shards / nodes;
  const int per_group = experts / groups;
  // Each node must hold the same number of groups, each of its experts once, and no more
  // replicas of one than it has shards.
  if (groups % nodes != 0 || experts / nodes < k) return false;
  std::vector<std::pair<int, double>> group_load;
  for (int g = 0; g < groups; ++g) {
    double sum = 0;
    for (int e = g * per_group; e < (g + 1) * per_group; ++e)
      sum += load[e];
    group_load.emplace_back(g, sum);
  }
  balanced_packer node_packer(nodes, groups / nodes);
  if (!node_packer.pack(std::move(group_load))) return false;
  for (int n = 0; n < nodes; ++n) {
    std::vector<int> members;
    for (const auto& item : node_packer.bin(n)) {
      for (int e = item.first * per_group; e < (item.first + 1) * per_group; ++e)
        members.push_back(e);
    }
    if (!replicate_and_pack(load, members, n * per_node, per_node, k, row)) return false;
  }
  return true;
}

}  // namespace

result<layout> plan_deepseek_eplb(const load_matrix& load, int shards, int slots_per_shard,
                                  int nodes, int expert_groups) {
  planner_options options;
  options.shards = shards;
  options.slots_per_shard = slots_per_shard;
  options.nodes = nodes;
  // Given groups are each kept on one node, as the planner's groups_per_node keeps them.
  const bool grouped = expert_groups > 0 && nodes > 1;
  if (expert_groups > 0) options.expert_groups = expert_groups;
  options.groups_per_node = grouped;
  if (status s = validate_plan_input(load, options, nullptr); !s) return s.err();
  const int experts = static_cast<int>(load.front().size());
  const int groups = expert_groups > 0 ? expert_groups : experts;
  std::vector<int> all(experts);
  std::iota(all.begin(), all.end(), 0);
  std::vector<std::vector<int32_t>> phy2log(load.size());
  for (size_t layer = 0; layer < load.size(); ++layer) {
    auto& row = phy2log[layer];
    row.assign(static_cast<size_t>(shards) * slots_per_shard, -1);
    if (nodes > 1 && plan_hierarchical(load[layer], shards, slots_per_shard, nodes, groups, row)) {
      continue;
    }
    if (grouped || !replicate_and_pack(load[layer], all, 0, shards, slots_per_shard, row)) {
      return error(errc::internal,
                   "deepseek-eplb found no legal packing for layer " + std::to_string(layer));
    }
  }
  const layout_shape shape{static_cast<int>(load.size()), experts, shards, slots_per_shard};
  return layout::from_phy2log(shape, std::move(phy2log), 0);
}

}  // namespace brigade::eplb
