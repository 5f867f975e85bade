#include "eplb/planner.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "eplb/layer_plans.hpp"
#include "eplb/shard_packing.hpp"

namespace brigade::eplb {

namespace {

struct candidate {
  std::vector<int32_t> row;
  double busiest = 0;
  int moved = 0;
};

double busiest_of(const shard_assignment& a) {
  return a.load(a.busiest_shard());
}

/// Repairs `current_row` with the given replica counts toward `goal`; false when no legal repair
/// exists or a replica alone is heavier than the goal (then no repair can reach it).
bool try_repair(const double* load, const layer_dims& dims, const int32_t* current_row,
                const std::vector<int32_t>& counts, double goal, candidate& out) {
  for (int e = 0; e < dims.experts; ++e) {
    if (load[e] / counts[e] > goal) return false;
  }
  shard_assignment repaired(dims.experts, dims.shards, dims.slots_per_shard, dims.nodes);
  if (!repair_layer(load, current_row, counts.data(), goal, repaired)) return false;
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

/// Repairs of the current row toward `goal`: first keeping its replica counts, then, if that
/// falls short or moves more than `few_moves`, with `new_counts`.
void add_repairs(const double* load, const layer_dims& dims, const int32_t* current_row,
                 const std::vector<int32_t>& new_counts, double goal, int few_moves,
                 std::vector<candidate>& options) {
  const std::vector<int32_t> kept_counts = replica_counts_of(current_row, dims);
  candidate c;
  if (try_repair(load, dims, current_row, kept_counts, goal, c)) {
    const bool enough = reaches(c, goal) && c.moved <= few_moves;
    options.push_back(std::move(c));
    if (enough) return;
  }
  if (new_counts != kept_counts && try_repair(load, dims, current_row, new_counts, goal, c)) {
    options.push_back(std::move(c));
  }
}

/// The plan of one layer that moves the fewest slots from `current_row` while its busiest shard
/// stays within `slack` of the mean shard load above what a fresh plan reaches.
std::vector<int32_t> plan_layer_near(const double* load, const layer_dims& dims,
                                     const int32_t* current_row, double slack) {
  const int slots = dims.shards * dims.slots_per_shard;
  std::vector<int32_t> counts(dims.experts);
  allocate_replicas(load, dims.experts, slots, dims.shards, counts.data());
  double total = 0;
  double largest_replica = 0;
  for (int e = 0; e < dims.experts; ++e) {
    total += load[e];
    largest_replica = std::max(largest_replica, load[e] / counts[e]);
  }
  // A fresh plan usually stops within fresh_plan_tolerance of this lower bound, so the goal can be
  // set without computing one; that is left for when repairing the current layout falls short.
  const double mean = total / dims.shards;
  double goal = std::max(mean, largest_replica) + (fresh_plan_tolerance + slack) * mean;
  // A repair that moves more than this may lose to the fresh plan renumbered onto the current one.
  const int few_moves = slots / 10;
  std::vector<candidate> options;
  add_repairs(load, dims, current_row, counts, goal, few_moves, options);
  if (options.empty() || !reaches(options.back(), goal) || options.back().moved > few_moves) {
    std::vector<int32_t> fresh_counts;
    const shard_assignment fresh = plan_layer_fresh(load, dims, fresh_counts);
    // When even the fresh plan cannot get near the bound, judge the repairs against it instead;
    // when it found better replica counts, try repairing toward those.
    const double relaxed = busiest_of(fresh) + slack * mean;
    if (relaxed > goal || fresh_counts != counts) {
      goal = std::max(goal, relaxed);
      options.clear();
      add_repairs(load, dims, current_row, fresh_counts, goal, few_moves, options);
    }
    candidate c{align_to_current(fresh, current_row), busiest_of(fresh), 0};
    c.moved =
        moved_in_layer(current_row, c.row.data(), dims.experts, dims.shards, dims.slots_per_shard);
    options.push_back(std::move(c));
  }
  auto better = [&](const candidate& x, const candidate& y) {
    if (reaches(x, goal) != reaches(y, goal)) return reaches(x, goal);
    if (reaches(x, goal) && x.moved != y.moved) return x.moved < y.moved;
    return x.busiest < y.busiest;
  };
  return std::move(*std::min_element(options.begin(), options.end(), better)).row;
}

}  // namespace

status validate_plan_input(const load_matrix& load, const planner_options& options,
                           const layout* current) {
  if (status s = validate_load_matrix(load); !s) return s;
  const layout_shape shape{static_cast<int>(load.size()), static_cast<int>(load.front().size()),
                           options.shards, options.slots_per_shard};
  if (status s = validate_layout_shape(shape); !s) return s;
  if (options.nodes <= 0 || options.shards % options.nodes != 0) {
    return error(errc::invalid_argument,
                 std::to_string(options.nodes) + " nodes do not divide " +
                     std::to_string(options.shards) +
                     " shards: every node must hold the same number of shards");
  }
  if (!(options.keep_slack >= 0)) {
    return error(errc::invalid_argument, "keep_slack must be a non-negative fraction");
  }
  if (current && current->shape() != shape) {
    return error(errc::invalid_argument,
                 "current layout has " + std::to_string(current->layers()) + " layers, " +
                     std::to_string(current->experts()) + " experts, " +
                     std::to_string(current->shards()) + " shards of " +
                     std::to_string(current->slots_per_shard()) + " slots; the load and options " +
                     "need " + std::to_string(shape.layers) + ", " + std::to_string(shape.experts) +
                     ", " + std::to_string(shape.shards) + ", " +
                     std::to_string(shape.slots_per_shard));
  }
  return ok_status();
}

result<layout> plan_layout(const load_matrix& load, const planner_options& options,
                           const layout* current) {
  if (status s = validate_plan_input(load, options, current); !s) return s.err();
  const layer_dims dims{static_cast<int>(load.front().size()), options.shards,
                        options.slots_per_shard, options.nodes};
  std::vector<std::vector<int32_t>> phy2log(load.size());
  std::vector<double> summed_load(options.shards, 0.0);
  for (size_t layer = 0; layer < load.size(); ++layer) {
    if (current) {
      phy2log[layer] =
          plan_layer_near(load[layer].data(), dims,
                          current->phy2log(static_cast<int>(layer)).data(), options.keep_slack);
    } else {
      std::vector<int32_t> counts;
      const shard_assignment fresh = plan_layer_fresh(load[layer].data(), dims, counts);
      phy2log[layer] = align_to_summed_load(fresh, summed_load);
    }
  }
  const layout_shape shape{static_cast<int>(load.size()), dims.experts, options.shards,
                           options.slots_per_shard};
  return layout::from_phy2log(shape, std::move(phy2log), current ? current->epoch() + 1 : 0);
}

}  // namespace brigade::eplb
