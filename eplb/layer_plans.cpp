#include "eplb/layer_plans.hpp"

#include <algorithm>
#include <utility>

#include "eplb/shard_packing.hpp"

namespace brigade::eplb {

namespace {

/// Packs a layer for fixed replica counts: heaviest first, then swaps.
void pack_layer(shard_assignment& a, const double* load, const std::vector<int32_t>& counts,
                double mean) {
  a.clear();
  a.set_replicas(load, counts.data());
  if (!pack_heaviest_first(a)) {
    a.clear();
    pack_round_robin(a);
  }
  improve_by_swaps(a, busiest_shard_lower_bound(a) + fresh_plan_tolerance * mean,
                   a.shards() * a.slots_per_shard());
}

/// The expert whose replica costs least to give up: the lowest load per replica after losing one.
int cheapest_donor(const double* load, const std::vector<int32_t>& counts, int except) {
  int donor = -1;
  for (int f = 0; f < static_cast<int>(counts.size()); ++f) {
    if (f == except || counts[f] < 2) continue;
    if (donor < 0 || load[f] / (counts[f] - 1) < load[donor] / (counts[donor] - 1)) donor = f;
  }
  return donor;
}

/// One step of count refinement: gives a replica to an expert on the busiest shard, taken from
/// the cheapest donor, and keeps the first such change whose repacked layer has a lighter busiest
/// shard. Returns false when none of the tried changes helps.
bool refine_counts_once(shard_assignment& a, const double* load, std::vector<int32_t>& counts,
                        double mean) {
  constexpr int experts_tried = 3;
  const int busiest = a.busiest_shard();
  std::vector<int32_t> on_busiest;
  for (int i = 0; i < a.slots_per_shard(); ++i) {
    const int32_t e = a.expert_at(busiest, i);
    if (counts[e] < a.shards()) on_busiest.push_back(e);
  }
  std::sort(on_busiest.begin(), on_busiest.end(),
            [&](int32_t x, int32_t y) { return a.replica_load(x) > a.replica_load(y); });
  if (on_busiest.size() > experts_tried) on_busiest.resize(experts_tried);
  shard_assignment trial(a.experts(), a.shards(), a.slots_per_shard(), a.nodes());
  for (int32_t e : on_busiest) {
    const int donor = cheapest_donor(load, counts, e);
    if (donor < 0) return false;
    std::vector<int32_t> trial_counts = counts;
    ++trial_counts[e];
    --trial_counts[donor];
    pack_layer(trial, load, trial_counts, mean);
    if (trial.load(trial.busiest_shard()) < a.load(busiest) * (1 - 1e-9)) {
      a = std::move(trial);
      counts = std::move(trial_counts);
      return true;
    }
  }
  return false;
}

/// Places a new replica of `expert` on the lightest full shard that can take it, moving that
/// shard's lightest movable expert into a free slot elsewhere, when that leaves the two touched
/// shards lighter than placing the replica directly in the least loaded free slot. Freed slots sit
/// where surplus replicas were removed, usually on busy shards, so a direct placement there would
/// leave the busy shard busy.
bool place_by_eviction(shard_assignment& a, int expert) {
  const int k = a.slots_per_shard();
  int direct = -1;
  for (int s = 0; s < a.shards(); ++s) {
    if (a.fits(s, expert) && (direct < 0 || a.load(s) < a.load(direct))) direct = s;
  }
  const double w = a.replica_load(expert);
  const double direct_max = direct >= 0 ? a.load(direct) + w : 1e300;
  int host = -1;
  for (int s = 0; s < a.shards(); ++s) {
    if (a.filled(s) < k || a.holds(s, expert) || !a.node_allows(a.node_of(s), expert)) continue;
    if (host < 0 || a.load(s) < a.load(host)) host = s;
  }
  if (host < 0) return false;
  int best_local = -1;
  int best_free = -1;
  double best_max = direct_max;
  for (int i = 0; i < k; ++i) {
    const int32_t y = a.expert_at(host, i);
    for (int f = 0; f < a.shards(); ++f) {
      if (f == host || a.filled(f) == k || a.holds(f, y)) continue;
      if (a.node_of(f) != a.node_of(host) && !a.node_allows(a.node_of(f), y)) continue;
      const double touched =
          std::max(a.load(host) - a.replica_load(y) + w, a.load(f) + a.replica_load(y));
      if (touched < best_max) {
        best_max = touched;
        best_local = i;
        best_free = f;
      }
    }
  }
  if (best_local < 0) return false;
  const int32_t y = a.expert_at(host, best_local);
  a.remove(host, best_local);
  a.place(best_free, y);
  a.place(host, expert);
  return true;
}

}  // namespace

shard_assignment plan_layer_fresh(const double* load, const layer_dims& dims,
                                  std::vector<int32_t>& counts) {
  // Bounds the repacks spent on layers whose replicas are too coarse to balance by swaps alone.
  constexpr int max_count_refinements = 8;
  shard_assignment a(dims.experts, dims.shards, dims.slots_per_shard, dims.nodes);
  counts.resize(dims.experts);
  allocate_replicas(load, dims.experts, dims.shards * dims.slots_per_shard, dims.shards,
                    counts.data());
  double total = 0;
  for (int e = 0; e < dims.experts; ++e)
    total += load[e];
  const double mean = total / dims.shards;
  pack_layer(a, load, counts, mean);
  // Counts that minimise the largest replica can still pack badly, for instance when many
  // replicas weigh just over half a shard's share; then trade replicas between experts.
  for (int i = 0; i < max_count_refinements; ++i) {
    if (a.load(a.busiest_shard()) <= busiest_shard_lower_bound(a) + fresh_plan_tolerance * mean) {
      break;
    }
    if (!refine_counts_once(a, load, counts, mean)) break;
  }
  return a;
}

std::vector<int32_t> replica_counts_of(const int32_t* row, const layer_dims& dims) {
  std::vector<int32_t> counts(dims.experts, 0);
  for (int slot = 0; slot < dims.shards * dims.slots_per_shard; ++slot)
    ++counts[row[slot]];
  return counts;
}

bool repair_layer(const double* load, const int32_t* current_row, const int32_t* counts,
                  double goal, int max_moves, shard_assignment& out) {
  const layer_dims dims{out.experts(), out.shards(), out.slots_per_shard(), out.nodes()};
  const std::vector<int32_t> before = replica_counts_of(current_row, dims);
  out.set_replicas(load, before.data());
  out.assign_from(current_row);
  // Surplus replicas leave the node holding most copies of the expert, then the busiest shard.
  for (int e = 0; e < dims.experts; ++e) {
    for (int surplus = before[e] - counts[e]; surplus > 0; --surplus) {
      int victim = -1;
      for (int s = 0; s < dims.shards; ++s) {
        if (!out.holds(s, e)) continue;
        if (victim < 0 ||
            std::make_pair(out.node_replicas(out.node_of(s), e), out.load(s)) >
                std::make_pair(out.node_replicas(out.node_of(victim), e), out.load(victim))) {
          victim = s;
        }
      }
      for (int i = 0; i < dims.slots_per_shard; ++i) {
        if (out.expert_at(victim, i) == e) out.remove(victim, i);
      }
    }
  }
  out.set_replicas(load, counts);
  // Fewer replicas lower an expert's node cap; a layout that then breaks one is not repaired here.
  if (!out.node_caps_hold()) return false;
  std::vector<int32_t> added;
  for (int e = 0; e < dims.experts; ++e) {
    if (counts[e] > before[e]) added.insert(added.end(), counts[e] - before[e], e);
  }
  std::stable_sort(added.begin(), added.end(),
                   [&](int32_t x, int32_t y) { return out.replica_load(x) > out.replica_load(y); });
  // Each new replica moves one slot, an eviction one more; evict only while the budget allows.
  int moves = 0;
  for (size_t i = 0; i < added.size(); ++i) {
    const int still_to_place = static_cast<int>(added.size() - i - 1);
    if (moves + 2 + still_to_place <= max_moves && place_by_eviction(out, added[i])) {
      moves += 2;
      continue;
    }
    if (!place_replica(out, added[i])) return false;
    ++moves;
  }
  if (!out.node_caps_hold()) return false;
  // A swap moves at most two slots, so this many keep the repair within its budget.
  const int moved = moved_in_layer(current_row, out.phy2log().data(), dims.experts, dims.shards,
                                   dims.slots_per_shard);
  improve_by_swaps(out, goal, std::max(0, (max_moves - moved) / 2));
  return true;
}
int moved_in_layer(const int32_t* from, const int32_t* to, int experts, int shards,
                   int slots_per_shard) {
  const int k = slots_per_shard;
  std::vector<int32_t> stamp(experts, -1);
  int moved = 0;
  for (int s = 0; s < shards; ++s) {
    for (int i = 0; i < k; ++i)
      stamp[from[s * k + i]] = s;
    for (int i = 0; i < k; ++i)
      moved += stamp[to[s * k + i]] != s;
  }
  return moved;
}

}  // namespace brigade::eplb
