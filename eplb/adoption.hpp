// The supervisor's rule for adopting a proposed layout: only when the predicted balance gain pays
// for the migration.
#pragma once

#include <vector>

#include "eplb/layout.hpp"
#include "eplb/load_matrix.hpp"

namespace brigade::eplb {

struct adoption_decision {
  /// True when the proposal should replace the current layout.
  bool adopt = false;
  /// layer_max_over_mean of the current layout under the load (see balance_metrics.hpp).
  double current_imbalance = 1;
  /// layer_max_over_mean of the proposed layout under the load.
  double proposed_imbalance = 1;
  /// Relative reduction of the imbalance: (current - proposed) / current.
  double gain = 0;
  /// Slots the migration would copy (see moved_slots).
  int moved_slots = 0;
};

/// Judges a proposal against the current layout under the load both were planned for. The gain is
/// measured on layer_max_over_mean, the figure that sets step time; the proposal is adopted when
/// it moves at least one slot and its gain is at least `margin` (0.02 asks for 2% less imbalance).
adoption_decision judge_adoption(const layout& current, const layout& proposed,
                                 const load_matrix& load, double margin);

/// The same rule along a trajectory of loads (load_forecast::trajectory, at least one point): each
/// imbalance is the mean over the points of layer_max_over_mean, the mean step-time factor of the
/// windows the loads stand for. A layout that drifts out of balance across them shows it here,
/// where their middle alone would not.
adoption_decision judge_adoption(const layout& current, const layout& proposed,
                                 const std::vector<load_matrix>& trajectory, double margin);

}  // namespace brigade::eplb
