#include "eplb/shard_packing.hpp"

#include <algorithm>
#include <cassert>
#include <functional>
#include <numeric>
#include <queue>
#include <utility>
#include <vector>

namespace brigade::eplb {

namespace {

/// Loads closer than this (relative to the busiest shard) count as equal, so that rounding noise
/// never drives the search.
constexpr double relative_epsilon = 1e-12;

/// Moves some expert off full shard `a`, which can take `expert`, onto a shard with a free slot,
/// then places `expert` on `a`.
bool make_room_and_place(shard_assignment& a, int shard, int expert) {
  const int k = a.slots_per_shard();
  for (int local = 0; local < k; ++local) {
    const int32_t moving = a.expert_at(shard, local);
    for (int target = 0; target < a.shards(); ++target) {
      if (target == shard || a.filled(target) == k || a.holds(target, moving)) continue;
      if (a.node_of(target) != a.node_of(shard) && !a.node_allows(a.node_of(target), moving)) {
        continue;
      }
      a.remove(shard, local);
      a.place(target, moving);
      a.place(shard, expert);
      return true;
    }
  }
  return false;
}

struct swap_choice {
  int local_a = -1;
  int local_b = -1;
  double pair_max = 0;
};

/// The swap between busiest shard `a` and shard `b` that leaves the lower maximum of the two.
swap_choice best_swap(const shard_assignment& s, int a, int b) {
  constexpr int max_cached = 64;
  const int k = s.slots_per_shard();
  const double load_a = s.load(a);
  const double load_b = s.load(b);
  const double gap = load_a - load_b;
  const double eps = relative_epsilon * load_a;
  double weight_b[max_cached];
  const bool cached = k <= max_cached;
  if (cached) {
    for (int j = 0; j < k; ++j)
      weight_b[j] = s.replica_load(s.expert_at(b, j));
  }
  swap_choice best;
  best.pair_max = load_a - eps;
  for (int i = 0; i < k; ++i) {
    const double wx = s.replica_load(s.expert_at(a, i));
    for (int j = 0; j < k; ++j) {
      const double d = wx - (cached ? weight_b[j] : s.replica_load(s.expert_at(b, j)));
      if (d <= eps || d >= gap - eps) continue;
      const double pair_max = std::max(load_a - d, load_b + d);
      if (pair_max < best.pair_max && s.can_swap(a, i, b, j)) {
        best.local_a = i;
        best.local_b = j;
        best.pair_max = pair_max;
      }
    }
  }
  return best;
}

}  // namespace

void allocate_replicas(const double* load, int experts, int slots, int max_per_expert,
                       int32_t* counts) {
  assert(slots >= experts && static_cast<long long>(max_per_expert) * experts >= slots);
  using entry = std::pair<double, int>;
  // Highest load per replica first; among equals the lower expert id, so plans are deterministic.
  auto lower = [](const entry& x, const entry& y) {
    return x.first < y.first || (x.first == y.first && x.second > y.second);
  };
  std::vector<entry> heap_storage;
  heap_storage.reserve(experts);
  for (int e = 0; e < experts; ++e) {
    counts[e] = 1;
    if (max_per_expert > 1) heap_storage.emplace_back(load[e], e);
  }
  std::priority_queue<entry, std::vector<entry>, decltype(lower)> heap(lower,
                                                                       std::move(heap_storage));
  for (int extra = slots - experts; extra > 0; --extra) {
    const int e = heap.top().second;
    heap.pop();
    ++counts[e];
    if (counts[e] < max_per_expert) heap.emplace(load[e] / counts[e], e);
  }
}

bool place_replica(shard_assignment& a, int expert) {
  int best = -1;
  for (int s = 0; s < a.shards(); ++s) {
    if (a.fits(s, expert) && (best < 0 || a.load(s) < a.load(best))) best = s;
  }
  if (best >= 0) {
    a.place(best, expert);
    return true;
  }
  std::vector<int> order(a.shards());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int x, int y) { return a.load(x) < a.load(y); });
  for (int s : order) {
    if (a.holds(s, expert) || !a.node_allows(a.node_of(s), expert)) continue;
    if (make_room_and_place(a, s, expert)) return true;
  }
  return false;
}

bool pack_heaviest_first(shard_assignment& a) {
  // Heaviest first; among equal loads the lower expert id, so plans are deterministic.
  std::vector<std::pair<double, int32_t>> items;
  items.reserve(static_cast<size_t>(a.shards()) * a.slots_per_shard());
  for (int e = 0; e < a.experts(); ++e) {
    for (int r = 0; r < a.replica_count(e); ++r)
      items.emplace_back(-a.replica_load(e), e);
  }
  std::sort(items.begin(), items.end());
  // Shards with a free slot in a min-heap by (load, shard): the lightest, lowest id on top.
  using entry = std::pair<double, int>;
  std::vector<entry> heap;
  auto rebuild = [&] {
    heap.clear();
    for (int s = 0; s < a.shards(); ++s) {
      if (a.filled(s) < a.slots_per_shard()) heap.emplace_back(a.load(s), s);
    }
    std::make_heap(heap.begin(), heap.end(), std::greater<>());
  };
  rebuild();
  std::vector<entry> skipped;
  for (const auto& item : items) {
    const int e = item.second;
    int chosen = -1;
    skipped.clear();
    while (!heap.empty() && chosen < 0) {
      std::pop_heap(heap.begin(), heap.end(), std::greater<>());
      const entry top = heap.back();
      heap.pop_back();
      if (a.fits(top.second, e)) {
        chosen = top.second;
      } else {
        skipped.push_back(top);
      }
    }
    for (const entry& back : skipped) {
      heap.push_back(back);
      std::push_heap(heap.begin(), heap.end(), std::greater<>());
    }
    if (chosen < 0) {
      // Every shard with room holds the expert (or its node is full of it): repair, then resync.
      if (!place_replica(a, e)) return false;
      rebuild();
      continue;
    }
    a.place(chosen, e);
    if (a.filled(chosen) < a.slots_per_shard()) {
      heap.emplace_back(a.load(chosen), chosen);
      std::push_heap(heap.begin(), heap.end(), std::greater<>());
    }
  }
  return true;
}

void pack_round_robin(shard_assignment& a) {
  // Position q goes to node q % nodes, and within it to shard (q / nodes) % shards_per_node. Any
  // run of r <= shards consecutive positions then hits r distinct shards and every node at most
  // ceil(r / nodes) times, so an expert's replicas, dealt consecutively, break no rule.
  const int shards_per_node = a.shards() / a.nodes();
  int q = 0;
  for (int e = 0; e < a.experts(); ++e) {
    for (int r = 0; r < a.replica_count(e); ++r, ++q) {
      const int position = q % a.shards();
      const int shard = (position % a.nodes()) * shards_per_node + (position / a.nodes());
      a.place(shard, e);
    }
  }
}

int improve_by_swaps(shard_assignment& a, double goal, int max_swaps) {
  std::vector<char> tried(a.shards());
  int swaps = 0;
  while (swaps < max_swaps) {
    const int busiest = a.busiest_shard();
    if (a.load(busiest) <= goal) break;
    // Lighter shards in ascending order of load, found one at a time: the lightest one usually
    // takes a swap, so sorting them all would be wasted work.
    std::fill(tried.begin(), tried.end(), 0);
    tried[busiest] = 1;
    bool swapped = false;
    for (;;) {
      int b = -1;
      for (int s = 0; s < a.shards(); ++s) {
        if (!tried[s] && (b < 0 || a.load(s) < a.load(b))) b = s;
      }
      if (b < 0 || a.load(b) >= a.load(busiest)) break;
      tried[b] = 1;
      const swap_choice c = best_swap(a, busiest, b);
      if (c.local_a < 0) continue;
      a.swap(busiest, c.local_a, b, c.local_b);
      swapped = true;
      break;
    }
    if (!swapped) break;
    ++swaps;
  }
  return swaps;
}

double busiest_shard_lower_bound(const shard_assignment& a) {
  double largest = 0;
  for (int e = 0; e < a.experts(); ++e)
    largest = std::max(largest, a.replica_load(e));
  return std::max(a.total_load() / a.shards(), largest);
}

}  // namespace brigade::eplb
