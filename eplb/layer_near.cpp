// The re-plan of one layer near its current row: kept as is within the slack, else repaired,
// else the fresh plan renumbered onto it, whichever the move budget and the goal favour.
#include "eplb/layer_plans.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include "eplb/shard_packing.hpp"
#include "eplb/shard_renumbering.hpp"

namespace brigade::eplb {
namespace {

struct candidate {
  std::vector<int32_t> row;
  double busiest = 0;
  int moved = 0;
  /// Its move budget: the plan's, or more when its replica count changes alone need more.
  int allowed = 0;
};

double busiest_of(const shard_assignment& a) {
  return a.load(a.busiest_shard());
}

/// What one layer's re-plan aims for and may spend.
struct layer_terms {
  double goal = 0;    ///< A layer whose busiest shard is at most this is good enough.
  double target = 0;  ///< A layer that must be repaired is repaired down to this.
  int max_moves = 0;  ///< Slots the layer may move in one plan, count changes aside.
};

/// Slots that changing the current replica counts to `counts` moves at the least.
int count_change_moves(const int32_t* current_row, const std::vector<int32_t>& counts,
                       const layer_dims& dims) {
  const std::vector<int32_t> before = replica_counts_of(current_row, dims);
  int moves = 0;
  for (int e = 0; e < dims.experts; ++e)
    moves += std::max(0, counts[e] - before[e]);
  return moves;
}

/// Repairs `current_row` with the given replica counts; false when no legal repair exists or a
/// replica alone is heavier than the target (then no repair can reach it).
bool try_repair(const double* load, const layer_dims& dims, const int32_t* current_row,
                const std::vector<int32_t>& counts, const layer_terms& terms, candidate& out) {
  for (int e = 0; e < dims.experts; ++e) {
    if (load[e] / counts[e] > terms.target) return false;
  }
  // The budget never blocks the replica count changes themselves.
  out.allowed = std::max(terms.max_moves, count_change_moves(current_row, counts, dims));
  shard_assignment repaired(dims.experts, dims.shards, dims.slots_per_shard, dims.nodes);
  if (!repair_layer(load, current_row, counts.data(), terms.target, out.allowed, repaired)) {
    return false;
  }
  out.row = repaired.phy2log();
  out.busiest = busiest_of(repaired);
  out.moved =
      moved_in_layer(current_row, out.row.data(), dims.experts, dims.shards, dims.slots_per_shard);
  return true;
}

/// Whether a candidate reaches the goal, allowing for rounding.
bool reaches(const candidate& c, double goal) {
  return c.busiest <= goal * (1 + 1e-9);
}

/// Repairs of the current row: with `new_counts` first, since counts planned for the latest
/// load hold up better while the load drifts on, then, if that falls short, with the current
/// replica counts.
void add_repairs(const double* load, const layer_dims& dims, const int32_t* current_row,
                 const std::vector<int32_t>& new_counts, const layer_terms& terms,
                 std::vector<candidate>& options) {
  candidate c;
  if (try_repair(load, dims, current_row, new_counts, terms, c)) {
    const bool enough = reaches(c, terms.goal);
    options.push_back(std::move(c));
    if (enough) return;
  }
  const std::vector<int32_t> kept_counts = replica_counts_of(current_row, dims);
  if (kept_counts != new_counts && try_repair(load, dims, current_row, kept_counts, terms, c)) {
    options.push_back(std::move(c));
  }
}

/// The current row as it is, when it satisfies the node caps.
bool add_as_is(const double* load, const layer_dims& dims, const int32_t* current_row,
               std::vector<candidate>& options) {
  const std::vector<int32_t> counts = replica_counts_of(current_row, dims);
  shard_assignment as_is(dims.experts, dims.shards, dims.slots_per_shard, dims.nodes);
  as_is.set_replicas(load, counts.data());
  as_is.assign_from(current_row);
  if (dims.nodes > 1 && !as_is.node_caps_hold()) return false;
  const size_t slots = static_cast<size_t>(dims.shards) * dims.slots_per_shard;
  options.push_back(
      {std::vector<int32_t>(current_row, current_row + slots), busiest_of(as_is), 0, 0});
  return true;
}

/// The candidate to adopt: within the move budget, then reaching the goal, then fewest moves
/// among those that reach it, or the lightest busiest shard among those that do not.
const candidate& choose(const std::vector<candidate>& options, const layer_terms& terms) {
  auto better = [&](const candidate& x, const candidate& y) {
    const bool x_within = x.moved <= x.allowed;
    const bool y_within = y.moved <= y.allowed;
    if (x_within != y_within) return x_within;
    if (reaches(x, terms.goal) != reaches(y, terms.goal)) return reaches(x, terms.goal);
    if (reaches(x, terms.goal) && x.moved != y.moved) return x.moved < y.moved;
    return x.busiest < y.busiest;
  };
  return *std::min_element(options.begin(), options.end(), better);
}

}  // namespace

std::vector<int32_t> plan_layer_near(const double* load, const layer_dims& dims,
                                     const int32_t* current_row, const near_terms& o) {
  const int slots = dims.shards * dims.slots_per_shard;
  std::vector<int32_t> counts(dims.experts);
  allocate_replicas(load, dims.experts, slots, dims.shards, counts.data());
  double total = 0;
  double largest_replica = 0;
  for (int e = 0; e < dims.experts; ++e) {
    total += load[e];
    largest_replica = std::max(largest_replica, load[e] / counts[e]);
  }
  // A fresh plan usually stops within fresh_plan_tolerance of this bound, so the goal can be set
  // without computing one; that is left for when repairing the current layout falls short.
  const double mean = total / dims.shards;
  const double bound = std::max(mean, largest_replica) + fresh_plan_tolerance * mean;
  layer_terms terms;
  terms.goal = bound + o.keep_slack * mean;
  // Hysteresis: a layer within the slack stays as it is, but one that must change is repaired to
  // the middle of the slack, so that drift does not push it straight back over the goal.
  terms.target = bound + o.keep_slack * mean / 2;
  terms.max_moves = static_cast<int>(o.max_moved_fraction * slots);
  std::vector<candidate> options;
  if (add_as_is(load, dims, current_row, options) && reaches(options.back(), terms.goal)) {
    return std::move(options.back().row);
  }
  add_repairs(load, dims, current_row, counts, terms, options);
  if (options.empty() || !reaches(choose(options, terms), terms.goal)) {
    std::vector<int32_t> fresh_counts;
    const shard_assignment fresh = plan_layer_fresh(load, dims, fresh_counts);
    // When even the fresh plan cannot get near the bound, judge the repairs against it instead;
    // when it found better replica counts, try repairing toward those.
    const double reached = busiest_of(fresh);
    if (reached + o.keep_slack * mean > terms.goal || fresh_counts != counts) {
      terms.goal = std::max(terms.goal, reached + o.keep_slack * mean);
      terms.target = std::max(terms.target, reached + o.keep_slack * mean / 2);
      add_repairs(load, dims, current_row, fresh_counts, terms, options);
    }
    // Renumbered onto the current layout, the fresh plan keeps what it happens to share with it.
    candidate c{align_to_current(fresh, current_row), reached, 0, 0};
    c.moved =
        moved_in_layer(current_row, c.row.data(), dims.experts, dims.shards, dims.slots_per_shard);
    c.allowed = std::max(terms.max_moves, count_change_moves(current_row, fresh_counts, dims));
    options.push_back(std::move(c));
  }
  return choose(options, terms).row;
}

}  // namespace brigade::eplb
