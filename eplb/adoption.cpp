#include "eplb/adoption.hpp"

#include <cassert>

#include "eplb/balance_metrics.hpp"

namespace brigade::eplb {

adoption_decision judge_adoption(const layout& current, const layout& proposed,
                                 const load_matrix& load, double margin) {
  adoption_decision d;
  d.current_imbalance = measure_balance(current, load).layer_max_over_mean;
  d.proposed_imbalance = measure_balance(proposed, load).layer_max_over_mean;
  d.gain = (d.current_imbalance - d.proposed_imbalance) / d.current_imbalance;
  d.moved_slots = moved_slots(current, proposed);
  d.adopt = d.moved_slots > 0 && d.gain >= margin;
  return d;
}

adoption_decision judge_adoption(const layout& current, const layout& proposed,
                                 const std::vector<load_matrix>& trajectory, double margin) {
  assert(!trajectory.empty());
  adoption_decision d;
  d.current_imbalance = 0;
  d.proposed_imbalance = 0;
  for (const load_matrix& point : trajectory) {
    d.current_imbalance += measure_balance(current, point).layer_max_over_mean;
    d.proposed_imbalance += measure_balance(proposed, point).layer_max_over_mean;
  }
  d.current_imbalance /= trajectory.size();
  d.proposed_imbalance /= trajectory.size();
  d.gain = (d.current_imbalance - d.proposed_imbalance) / d.current_imbalance;
  d.moved_slots = moved_slots(current, proposed);
  d.adopt = d.moved_slots > 0 && d.gain >= margin;
  return d;
}

}  // namespace brigade::eplb
