#include "eplb/shard_renumbering.hpp"

#include <algorithm>
#include <numeric>
#include <utility>

namespace brigade::eplb {

namespace {

/// Pairs items of `from` with items of `to` greedily by descending overlap (row-major, n x n);
/// unmatched items take the remaining targets in ascending order. Returns target[from].
std::vector<int> match_by_overlap(const std::vector<int>& overlap, int n) {
  // Overlaps are small counts, so a bucket per value orders the pairs in linear time.
  int largest = 0;
  for (int v : overlap)
    largest = std::max(largest, v);
  std::vector<std::vector<std::pair<int, int>>> by_overlap(largest + 1);
  for (int f = 0; f < n; ++f) {
    for (int t = 0; t < n; ++t) {
      if (overlap[f * n + t] > 0) by_overlap[overlap[f * n + t]].emplace_back(f, t);
    }
  }
  std::vector<int> target(n, -1);
  std::vector<char> taken(n, 0);
  for (int v = largest; v > 0; --v) {
    for (const auto& [f, t] : by_overlap[v]) {
      if (target[f] < 0 && !taken[t]) {
        target[f] = t;
        taken[t] = 1;
      }
    }
  }
  int next = 0;
  for (int f = 0; f < n; ++f) {
    if (target[f] >= 0) continue;
    while (taken[next])
      ++next;
    target[f] = next;
    taken[next] = 1;
  }
  return target;
}

/// Copies the plan's shard g to shard target[g] of a new row, keeping slot order.
std::vector<int32_t> renumbered_row(const shard_assignment& plan, const std::vector<int>& target) {
  const int k = plan.slots_per_shard();
  std::vector<int32_t> row(plan.phy2log().size());
  for (int g = 0; g < plan.shards(); ++g) {
    for (int i = 0; i < k; ++i)
      row[target[g] * k + i] = plan.expert_at(g, i);
  }
  return row;
}

/// For each shard of `row`, moves experts that `current_row` had on that shard back into the slot
/// they had, so unchanged experts keep their slot numbers.
void keep_slot_positions(std::vector<int32_t>& row, const int32_t* current_row, int experts,
                         int shards, int k) {
  // local_of[e] is e's slot on the shard being fixed, valid while stamp[e] names that shard.
  std::vector<int32_t> stamp(experts, -1);
  std::vector<int32_t> local_of(experts, 0);
  std::vector<int32_t> placed(k);
  std::vector<int32_t> newcomers;
  for (int s = 0; s < shards; ++s) {
    int32_t* mine = &row[static_cast<size_t>(s) * k];
    const int32_t* before = current_row + static_cast<size_t>(s) * k;
    for (int i = 0; i < k; ++i) {
      stamp[before[i]] = s;
      local_of[before[i]] = i;
    }
    std::fill(placed.begin(), placed.end(), -1);
    newcomers.clear();
    for (int i = 0; i < k; ++i) {
      if (stamp[mine[i]] == s) {
        placed[local_of[mine[i]]] = mine[i];
      } else {
        newcomers.push_back(mine[i]);
      }
    }
    size_t next = 0;
    for (int i = 0; i < k; ++i) {
      if (placed[i] < 0) placed[i] = newcomers[next++];
    }
    std::copy(placed.begin(), placed.end(), mine);
  }
}

/// Matches whole nodes first (by summed overlap), then shards within each matched pair of nodes.
std::vector<int> match_shards(const shard_assignment& plan, const std::vector<int>& overlap) {
  const int shards = plan.shards();
  const int nodes = plan.nodes();
  const int per_node = shards / nodes;
  std::vector<int> node_overlap(static_cast<size_t>(nodes) * nodes, 0);
  for (int g = 0; g < shards; ++g) {
    for (int s = 0; s < shards; ++s) {
      node_overlap[(g / per_node) * nodes + s / per_node] += overlap[g * shards + s];
    }
  }
  const std::vector<int> node_target = match_by_overlap(node_overlap, nodes);
  std::vector<int> target(shards);
  std::vector<int> local(static_cast<size_t>(per_node) * per_node);
  for (int n = 0; n < nodes; ++n) {
    const int g0 = n * per_node;
    const int s0 = node_target[n] * per_node;
    for (int g = 0; g < per_node; ++g) {
      for (int s = 0; s < per_node; ++s) {
        local[g * per_node + s] = overlap[(g0 + g) * shards + s0 + s];
      }
    }
    const std::vector<int> within = match_by_overlap(local, per_node);
    for (int g = 0; g < per_node; ++g)
      target[g0 + g] = s0 + within[g];
  }
  return target;
}

/// Pairs `from` (sorted by descending weight) with `to` (sorted by ascending weight).
template <class Heavier, class Lighter>
std::vector<int> pair_heavy_with_light(int n, Heavier from_weight, Lighter to_weight) {
  std::vector<int> from(n);
  std::vector<int> to(n);
  std::iota(from.begin(), from.end(), 0);
  std::iota(to.begin(), to.end(), 0);
  std::stable_sort(from.begin(), from.end(),
                   [&](int x, int y) { return from_weight(x) > from_weight(y); });
  std::stable_sort(to.begin(), to.end(), [&](int x, int y) { return to_weight(x) < to_weight(y); });
  std::vector<int> target(n);
  for (int i = 0; i < n; ++i)
    target[from[i]] = to[i];
  return target;
}

}  // namespace

std::vector<int32_t> align_to_current(const shard_assignment& plan, const int32_t* current_row) {
  const int shards = plan.shards();
  const int k = plan.slots_per_shard();
  // Where each expert lives in the current row, as lists indexed by expert.
  std::vector<int32_t> offset(plan.experts() + 1, 0);
  for (int slot = 0; slot < shards * k; ++slot)
    ++offset[current_row[slot] + 1];
  std::partial_sum(offset.begin(), offset.end(), offset.begin());
  std::vector<int32_t> fill(offset.begin(), offset.end() - 1);
  std::vector<int32_t> home(static_cast<size_t>(shards) * k);
  for (int slot = 0; slot < shards * k; ++slot)
    home[fill[current_row[slot]]++] = slot / k;

  std::vector<int> overlap(static_cast<size_t>(shards) * shards, 0);
  for (int g = 0; g < shards; ++g) {
    for (int i = 0; i < k; ++i) {
      const int32_t e = plan.expert_at(g, i);
      for (int32_t j = offset[e]; j < offset[e + 1]; ++j)
        ++overlap[g * shards + home[j]];
    }
  }
  std::vector<int32_t> row = renumbered_row(plan, match_shards(plan, overlap));
  keep_slot_positions(row, current_row, plan.experts(), shards, k);
  return row;
}

std::vector<int32_t> align_to_summed_load(const shard_assignment& plan,
                                          std::vector<double>& summed_load) {
  const int per_node = plan.shards() / plan.nodes();
  auto plan_node_load = [&](int n) {
    double sum = 0;
    for (int s = n * per_node; s < (n + 1) * per_node; ++s)
      sum += plan.load(s);
    return sum;
  };
  auto summed_node_load = [&](int n) {
    double sum = 0;
    for (int s = n * per_node; s < (n + 1) * per_node; ++s)
      sum += summed_load[s];
    return sum;
  };
  const std::vector<int> node_target =
      pair_heavy_with_light(plan.nodes(), plan_node_load, summed_node_load);
  std::vector<int> target(plan.shards());
  for (int n = 0; n < plan.nodes(); ++n) {
    const int g0 = n * per_node;
    const int s0 = node_target[n] * per_node;
    const std::vector<int> within = pair_heavy_with_light(
        per_node, [&](int g) { return plan.load(g0 + g); },
        [&](int s) { return summed_load[s0 + s]; });
    for (int g = 0; g < per_node; ++g)
      target[g0 + g] = s0 + within[g];
  }
  for (int g = 0; g < plan.shards(); ++g)
    summed_load[target[g]] += plan.load(g);
  return renumbered_row(plan, target);
}

}  // namespace brigade::eplb
