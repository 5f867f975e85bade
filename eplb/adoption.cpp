#include "eplb/adoption.hpp"

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

}  // namespace brigade::eplb
