#include "eplb/group_packing.hpp"

#include <algorithm>
#include <numeric>
#include <tuple>

namespace brigade::eplb {

namespace {

int heaviest(const std::vector<double>& loads) {
  return static_cast<int>(std::max_element(loads.begin(), loads.end()) - loads.begin());
}

/// A swap of group g (on the heaviest node) with group h (elsewhere).
struct group_swap {
  int g = -1;
  int h = -1;
  double pair_max = 0;  ///< The larger of the two nodes' loads after the swap.
  int cost = 0;
  bool reaches = false;  ///< pair_max is at most the target.
};

/// Reaching the target first, then cheaper among those that reach it, then the lower pair.
bool better(const group_swap& x, const group_swap& y) {
  if (y.g < 0) return true;
  if (x.reaches != y.reaches) return x.reaches;
  if (x.reaches) return std::tie(x.cost, x.pair_max) < std::tie(y.cost, y.pair_max);
  return std::tie(x.pair_max, x.cost) < std::tie(y.pair_max, y.cost);
}

/// The slots moving group g from node `from` to node `to` copies; 0 without `held`.
int move_cost(const std::vector<int>& held, int nodes, int g, int from, int to) {
  if (held.empty()) return 0;
  return held[static_cast<size_t>(g) * nodes + from] - held[static_cast<size_t>(g) * nodes + to];
}

/// The swap off the heaviest node that lowers it most usefully within what is left to spend.
group_swap best_group_swap(const std::vector<int>& node_of_group,
                           const std::vector<double>& group_load, const std::vector<double>& load,
                           double target, const std::vector<int>& held, int left) {
  const int heavy = heaviest(load);
  const int nodes = static_cast<int>(load.size());
  // Loads closer than this count as equal, so that rounding noise never drives a swap.
  const double eps = 1e-12 * load[heavy];
  group_swap best;
  for (size_t g = 0; g < node_of_group.size(); ++g) {
    if (node_of_group[g] != heavy) continue;
    for (size_t h = 0; h < node_of_group.size(); ++h) {
      const int other = node_of_group[h];
      const double d = group_load[g] - group_load[h];
      if (other == heavy || d <= eps) continue;
      const int cost = move_cost(held, nodes, static_cast<int>(g), heavy, other) +
                       move_cost(held, nodes, static_cast<int>(h), other, heavy);
      group_swap c{static_cast<int>(g), static_cast<int>(h),
                   std::max(load[heavy] - d, load[other] + d), cost};
      if (c.pair_max >= load[heavy] - eps || c.cost > left) continue;
      c.reaches = c.pair_max <= target;
      if (better(c, best)) best = c;
    }
  }
  return best;
}

/// Whether shard `shard` (of a node's local row) holds local expert `e`.
bool shard_holds(const std::vector<int32_t>& local_row, int k, int shard, int32_t e) {
  const auto first = local_row.begin() + static_cast<long>(shard) * k;
  return std::find(first, first + k, e) != first + k;
}

/// Frees slots of `local_row` until `needed` are free: each time a replica of the member that
/// gives one up most cheaply (the lowest load per replica after losing it).
void free_slots(std::vector<int32_t>& local_row, std::vector<int>& count,
                const std::vector<double>& local_load, int needed) {
  int freed = static_cast<int>(std::count(local_row.begin(), local_row.end(), -1));
  while (freed < needed) {
    int donor = -1;
    for (size_t m = 0; m < count.size(); ++m) {
      if (count[m] < 2) continue;
      if (donor < 0 || local_load[m] / (count[m] - 1) < local_load[donor] / (count[donor] - 1)) {
        donor = static_cast<int>(m);
      }
    }
    // The node has at least as many slots as members, so some member holds two while slots
    // are missing.
    const auto it = std::find(local_row.rbegin(), local_row.rend(), donor);
    *it = -1;
    --count[donor];
    ++freed;
  }
}

}  // namespace

std::vector<double> group_loads(const double* load, const group_dims& dims) {
  std::vector<double> out(static_cast<size_t>(dims.groups), 0.0);
  for (int e = 0; e < dims.experts; ++e)
    out[dims.group_of(e)] += load[e];
  return out;
}

std::vector<double> node_loads(const std::vector<int>& node_of_group,
                               const std::vector<double>& group_load, const group_dims& dims) {
  std::vector<double> out(static_cast<size_t>(dims.nodes), 0.0);
  for (size_t g = 0; g < node_of_group.size(); ++g)
    out[node_of_group[g]] += group_load[g];
  return out;
}

std::vector<int> pack_groups(const std::vector<double>& group_load, const group_dims& dims) {
  std::vector<int> order(static_cast<size_t>(dims.groups));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int x, int y) { return group_load[x] > group_load[y]; });
  std::vector<int> node_of_group(order.size(), -1);
  std::vector<double> load(static_cast<size_t>(dims.nodes), 0.0);
  std::vector<int> held(static_cast<size_t>(dims.nodes), 0);
  for (int g : order) {
    int best = -1;
    for (int n = 0; n < dims.nodes; ++n) {
      if (held[n] < dims.groups_per_node() && (best < 0 || load[n] < load[best])) best = n;
    }
    node_of_group[g] = best;
    load[best] += group_load[g];
    ++held[best];
  }
  // A fresh packing moves nothing, so its swaps are free.
  swap_groups(node_of_group, group_load, dims, 0.0, {}, 0);
  return node_of_group;
}

std::vector<int> groups_in_row(const int32_t* row, const group_dims& dims) {
  const std::vector<int> held = group_slots_by_node(row, dims);
  // (slots held, group, node), most slots first; lower ids win ties, so the map is deterministic.
  std::vector<std::tuple<int, int, int>> pairs;
  for (int g = 0; g < dims.groups; ++g) {
    for (int n = 0; n < dims.nodes; ++n)
      pairs.emplace_back(-held[g * dims.nodes + n], g, n);
  }
  std::sort(pairs.begin(), pairs.end());
  std::vector<int> node_of_group(static_cast<size_t>(dims.groups), -1);
  std::vector<int> groups_on(static_cast<size_t>(dims.nodes), 0);
  for (const auto& [minus_held, g, n] : pairs) {
    if (node_of_group[g] >= 0 || groups_on[n] == dims.groups_per_node()) continue;
    node_of_group[g] = n;
    ++groups_on[n];
  }
  return node_of_group;
}

std::vector<int> group_slots_by_node(const int32_t* row, const group_dims& dims) {
  const int k = dims.slots_per_shard;
  std::vector<int> held(static_cast<size_t>(dims.groups) * dims.nodes, 0);
  for (int slot = 0; slot < dims.shards * k; ++slot) {
    ++held[static_cast<size_t>(dims.group_of(row[slot])) * dims.nodes +
           slot / k / dims.shards_per_node()];
  }
  return held;
}

int swap_groups(std::vector<int>& node_of_group, const std::vector<double>& group_load,
                const group_dims& dims, double target, const std::vector<int>& held,
                int max_moves) {
  std::vector<double> load = node_loads(node_of_group, group_load, dims);
  int spent = 0;
  // Each swap lowers the sorted node loads, so the search ends; the bound keeps it short when
  // there are many small groups.
  const int max_swaps = 4 * dims.groups;
  for (int i = 0; i < max_swaps && load[heaviest(load)] > target; ++i) {
    const group_swap s =
        best_group_swap(node_of_group, group_load, load, target, held, max_moves - spent);
    if (s.g < 0) break;
    const int from = node_of_group[s.g];
    const int to = node_of_group[s.h];
    const double d = group_load[s.g] - group_load[s.h];
    load[from] -= d;
    load[to] += d;
    std::swap(node_of_group[s.g], node_of_group[s.h]);
    spent += s.cost;
  }
  return spent;
}

std::vector<int32_t> node_members(const std::vector<int>& node_of_group, int node,
                                  const group_dims& dims) {
  std::vector<int32_t> members;
  for (int g = 0; g < dims.groups; ++g) {
    if (node_of_group[g] != node) continue;
    for (int i = 0; i < dims.experts_per_group(); ++i)
      members.push_back(g * dims.experts_per_group() + i);
  }
  return members;
}

std::vector<double> member_loads(const double* load, const std::vector<int32_t>& members) {
  std::vector<double> out;
  out.reserve(members.size());
  for (int32_t e : members)
    out.push_back(load[e]);
  return out;
}

std::vector<int32_t> seeded_node_row(const int32_t* row, int node,
                                     const std::vector<int32_t>& members,
                                     const std::vector<double>& local_load,
                                     const group_dims& dims) {
  const int k = dims.slots_per_shard;
  const int spn = dims.shards_per_node();
  std::vector<int32_t> local_of(static_cast<size_t>(dims.experts), -1);
  for (size_t i = 0; i < members.size(); ++i)
    local_of[members[i]] = static_cast<int32_t>(i);
  std::vector<int32_t> out(static_cast<size_t>(dims.node_slots()));
  std::vector<int> count(members.size(), 0);
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = local_of[row[static_cast<size_t>(node) * out.size() + i]];
    if (out[i] >= 0) ++count[out[i]];
  }
  std::vector<int32_t> arriving;
  for (size_t m = 0; m < members.size(); ++m) {
    if (count[m] == 0) arriving.push_back(static_cast<int32_t>(m));
  }
  free_slots(out, count, local_load, static_cast<int>(arriving.size()));
  std::vector<double> shard_load(static_cast<size_t>(spn), 0.0);
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] >= 0) shard_load[i / k] += local_load[out[i]] / count[out[i]];
  }
  std::stable_sort(arriving.begin(), arriving.end(),
                   [&](int32_t x, int32_t y) { return local_load[x] > local_load[y]; });
  for (int32_t m : arriving) {
    int slot = -1;
    for (size_t i = 0; i < out.size(); ++i) {
      if (out[i] < 0 && (slot < 0 || shard_load[i / k] < shard_load[slot / k])) {
        slot = static_cast<int>(i);
      }
    }
    out[slot] = m;
    count[m] = 1;
    shard_load[slot / k] += local_load[m];
  }
  // Slots left over go to the members that need replicas most; a node has at least k members,
  // so some member is always missing from a shard with a free slot.
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] >= 0) continue;
    const int shard = static_cast<int>(i) / k;
    int best = -1;
    for (size_t m = 0; m < members.size(); ++m) {
      if (shard_holds(out, k, shard, static_cast<int32_t>(m))) continue;
      if (best < 0 || local_load[m] / count[m] > local_load[best] / count[best]) {
        best = static_cast<int>(m);
      }
    }
    out[i] = best;
    ++count[best];
  }
  return out;
}

}  // namespace brigade::eplb
