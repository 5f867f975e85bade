// What `bench balance` and its forecast comparison share: the cluster shapes they plan for, the
// mean and maximum of a series, and the adoption step of a simulated planner.
#pragma once

#include <algorithm>
#include <optional>
#include <vector>

#include "eplb/adoption.hpp"
#include "eplb/layout.hpp"
#include "eplb/load_matrix.hpp"

namespace brigade::bench {

struct cluster_shape {
  const char* name;
  int experts;
  int shards;
  int slots_per_shard;
};

/// DeepSeek-V3-like (256 routed experts) and a larger pool, as the benchmarks plan for them.
inline const cluster_shape balance_shapes[] = {{"384 experts, 64x7 slots", 384, 64, 7},
                                               {"256 experts, 32x9 slots", 256, 32, 9}};

inline double mean_of(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v)
    sum += x;
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

inline double max_of(const std::vector<double>& v) {
  return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
}

/// A simulated planner's step: the first plan is taken as is; later ones by the adoption rule,
/// judged on `judge_load` (a load matrix, or a trajectory of them), each adopted one recording
/// the share of slots it moved. `Run` holds current (optional layout), proposed, adopted and
/// moved_fraction.
template <class Run, class Judged>
void adopt_by_the_rule(Run& run, eplb::layout proposed, const Judged& judge_load, double margin) {
  if (!run.current) {
    run.current = std::move(proposed);
    return;
  }
  ++run.proposed;
  const eplb::adoption_decision d =
      eplb::judge_adoption(*run.current, proposed, judge_load, margin);
  if (!d.adopt) return;
  ++run.adopted;
  run.moved_fraction.push_back(static_cast<double>(d.moved_slots) /
                               (proposed.layers() * proposed.slots()));
  run.current = std::move(proposed);
}

}  // namespace brigade::bench
