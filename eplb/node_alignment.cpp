#include "eplb/node_alignment.hpp"

#include <algorithm>
#include <limits>
#include <set>

namespace brigade::eplb {
namespace {

int node_of(const std::vector<int>& shard_node, int shard) {
  return static_cast<size_t>(shard) < shard_node.size() ? shard_node[static_cast<size_t>(shard)]
                                                        : 0;
}

// holders[node] = experts some shard of that node holds in this layer; on[shard] likewise.
struct layer_holdings {
  std::vector<std::set<int32_t>> on;
  std::vector<std::set<int32_t>> on_node;
};

layer_holdings holdings(const layout& l, int layer, const std::vector<int>& shard_node) {
  layer_holdings h;
  h.on.resize(static_cast<size_t>(l.shards()));
  int nodes = 1;
  for (int s = 0; s < l.shards(); ++s)
    nodes = std::max(nodes, node_of(shard_node, s) + 1);
  h.on_node.resize(static_cast<size_t>(nodes));
  for (int slot = 0; slot < l.slots(); ++slot) {
    const int s = l.shard_of(slot);
    h.on[static_cast<size_t>(s)].insert(l.logical(layer, slot));
    h.on_node[static_cast<size_t>(node_of(shard_node, s))].insert(l.logical(layer, slot));
  }
  return h;
}

// The units of giving `experts` to physical shard `shard`.
double copy_units(const std::set<int32_t>& experts, int shard, const layer_holdings& now,
                  const std::vector<int>& shard_node, double cross_node_cost) {
  double units = 0;
  const auto& mine = now.on[static_cast<size_t>(shard)];
  const auto& node = now.on_node[static_cast<size_t>(node_of(shard_node, shard))];
  for (int32_t e : experts) {
    if (mine.count(e)) continue;
    units += node.count(e) ? 1.0 : cross_node_cost;
  }
  return units;
}

// Minimum-cost perfect assignment of rows to columns of a square matrix (Hungarian method with
// potentials, O(n^3)); out[row] = column.
std::vector<int> assign(const std::vector<std::vector<double>>& cost) {
  const int n = static_cast<int>(cost.size());
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> u(static_cast<size_t>(n) + 1, 0), v(static_cast<size_t>(n) + 1, 0);
  std::vector<int> p(static_cast<size_t>(n) + 1, 0), way(static_cast<size_t>(n) + 1, 0);
  for (int i = 1; i <= n; ++i) {
    p[0] = i;
    int j0 = 0;
    std::vector<double> minv(static_cast<size_t>(n) + 1, inf);
    std::vector<bool> used(static_cast<size_t>(n) + 1, false);
    do {
      used[static_cast<size_t>(j0)] = true;
      const int i0 = p[static_cast<size_t>(j0)];
      double delta = inf;
      int j1 = 0;
      for (int j = 1; j <= n; ++j) {
        if (used[static_cast<size_t>(j)]) continue;
        const double cur = cost[static_cast<size_t>(i0) - 1][static_cast<size_t>(j) - 1] -
                           u[static_cast<size_t>(i0)] - v[static_cast<size_t>(j)];
        if (cur < minv[static_cast<size_t>(j)]) {
          minv[static_cast<size_t>(j)] = cur;
          way[static_cast<size_t>(j)] = j0;
        }
        if (minv[static_cast<size_t>(j)] < delta) {
          delta = minv[static_cast<size_t>(j)];
          j1 = j;
        }
      }
      for (int j = 0; j <= n; ++j) {
        if (used[static_cast<size_t>(j)]) {
          u[static_cast<size_t>(p[static_cast<size_t>(j)])] += delta;
          v[static_cast<size_t>(j)] -= delta;
        } else {
          minv[static_cast<size_t>(j)] -= delta;
        }
      }
      j0 = j1;
    } while (p[static_cast<size_t>(j0)] != 0);
    do {
      const int j1 = way[static_cast<size_t>(j0)];
      p[static_cast<size_t>(j0)] = p[static_cast<size_t>(j1)];
      j0 = j1;
    } while (j0 != 0);
  }
  std::vector<int> out(static_cast<size_t>(n), 0);
  for (int j = 1; j <= n; ++j)
    out[static_cast<size_t>(p[static_cast<size_t>(j)]) - 1] = j - 1;
  return out;
}

}  // namespace

move_cost measure_moves(const layout& current, const layout& proposed,
                        const std::vector<int>& shard_node, double cross_node_cost) {
  move_cost c;
  for (int l = 0; l < proposed.layers(); ++l) {
    const layer_holdings now = holdings(current, l, shard_node);
    std::vector<std::set<int32_t>> copied(static_cast<size_t>(proposed.shards()));
    for (int slot = 0; slot < proposed.slots(); ++slot) {
      const int32_t e = proposed.logical(l, slot);
      if (e != current.logical(l, slot)) ++c.moved_slots;
      const int s = proposed.shard_of(slot);
      if (now.on[static_cast<size_t>(s)].count(e) ||
          !copied[static_cast<size_t>(s)].insert(e).second)
        continue;
      if (now.on_node[static_cast<size_t>(node_of(shard_node, s))].count(e)) {
        ++c.within_node;
      } else {
        ++c.across_nodes;
      }
    }
  }
  c.units = c.within_node + cross_node_cost * c.across_nodes;
  return c;
}

layout align_to_nodes(const layout& current, const layout& proposed,
                      const std::vector<int>& shard_node, double cross_node_cost) {
  const int shards = proposed.shards(), per = proposed.slots_per_shard();
  if (current.shape() != proposed.shape()) return proposed;
  std::vector<std::vector<int32_t>> maps;
  for (int l = 0; l < proposed.layers(); ++l) {
    const layer_holdings now = holdings(current, l, shard_node);
    std::vector<std::set<int32_t>> planned(static_cast<size_t>(shards));
    for (int slot = 0; slot < proposed.slots(); ++slot)
      planned[static_cast<size_t>(proposed.shard_of(slot))].insert(proposed.logical(l, slot));
    // The planner's own numbering wins ties: a tiny extra cost for any other shard.
    std::vector<std::vector<double>> cost(static_cast<size_t>(shards),
                                          std::vector<double>(static_cast<size_t>(shards)));
    for (int a = 0; a < shards; ++a) {
      for (int s = 0; s < shards; ++s) {
        cost[static_cast<size_t>(a)][static_cast<size_t>(s)] =
            copy_units(planned[static_cast<size_t>(a)], s, now, shard_node, cross_node_cost) +
            (a == s ? 0.0 : 1e-6);
      }
    }
    const std::vector<int> to = assign(cost);
    std::vector<int32_t> map(static_cast<size_t>(proposed.slots()), -1);
    for (int a = 0; a < shards; ++a) {
      const int s = to[static_cast<size_t>(a)];
      std::vector<int32_t> left(planned[static_cast<size_t>(a)].begin(),
                                planned[static_cast<size_t>(a)].end());
      // An expert the shard keeps stays in its slot; the new ones fill the others in order.
      for (int slot = s * per; slot < (s + 1) * per; ++slot) {
        auto it = std::find(left.begin(), left.end(), current.logical(l, slot));
        if (it == left.end()) continue;
        map[static_cast<size_t>(slot)] = *it;
        left.erase(it);
      }
      for (int slot = s * per; slot < (s + 1) * per && !left.empty(); ++slot) {
        if (map[static_cast<size_t>(slot)] >= 0) continue;
        map[static_cast<size_t>(slot)] = left.front();
        left.erase(left.begin());
      }
    }
    maps.push_back(std::move(map));
  }
  auto aligned = layout::from_phy2log(proposed.shape(), maps, proposed.epoch());
  return aligned ? std::move(aligned.value()) : proposed;
}

}  // namespace brigade::eplb
