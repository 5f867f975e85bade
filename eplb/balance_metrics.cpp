#include "eplb/balance_metrics.hpp"

#include <algorithm>
#include <cassert>

namespace brigade::eplb {

std::vector<double> shard_loads(const layout& l, const load_matrix& load, int layer) {
  assert(static_cast<int>(load.size()) == l.layers());
  assert(static_cast<int>(load[layer].size()) == l.experts());
  std::vector<double> per_shard(l.shards(), 0.0);
  const auto& phy2log = l.phy2log(layer);
  for (int slot = 0; slot < l.slots(); ++slot) {
    const int32_t expert = phy2log[slot];
    per_shard[l.shard_of(slot)] += load[layer][expert] / l.replica_count(layer, expert);
  }
  return per_shard;
}

double max_over_mean(const std::vector<double>& loads) {
  double sum = 0.0, most = 0.0;
  for (double l : loads) {
    sum += l;
    most = std::max(most, l);
  }
  return sum > 0 ? most * static_cast<double>(loads.size()) / sum : 1.0;
}

balance_report measure_balance(const layout& l, const load_matrix& load) {
  std::vector<double> summed(l.shards(), 0.0);
  double sum_of_layer_max = 0;
  double sum_of_layer_mean = 0;
  double worst_layer = 1;
  for (int layer = 0; layer < l.layers(); ++layer) {
    const std::vector<double> per_shard = shard_loads(l, load, layer);
    double total = 0;
    double busiest = 0;
    for (int s = 0; s < l.shards(); ++s) {
      summed[s] += per_shard[s];
      total += per_shard[s];
      busiest = std::max(busiest, per_shard[s]);
    }
    const double mean = total / l.shards();
    sum_of_layer_max += busiest;
    sum_of_layer_mean += mean;
    if (mean > 0) worst_layer = std::max(worst_layer, busiest / mean);
  }
  balance_report report;
  double total = 0;
  double busiest = 0;
  for (double s : summed) {
    total += s;
    busiest = std::max(busiest, s);
  }
  // An idle cluster is perfectly balanced: keep the defaults of 1 rather than divide by zero.
  if (busiest > 0) {
    report.balancedness = total / l.shards() / busiest;
    report.max_over_mean = 1 / report.balancedness;
  }
  if (sum_of_layer_mean > 0) report.layer_max_over_mean = sum_of_layer_max / sum_of_layer_mean;
  report.worst_layer_max_over_mean = worst_layer;
  return report;
}

int moved_slots(const layout& from, const layout& to) {
  assert(from.shape() == to.shape());
  const int k = to.slots_per_shard();
  int moved = 0;
  for (int layer = 0; layer < to.layers(); ++layer) {
    const auto& before = from.phy2log(layer);
    const auto& after = to.phy2log(layer);
    for (int shard = 0; shard < to.shards(); ++shard) {
      const auto first_before = before.begin() + shard * k;
      for (int i = 0; i < k; ++i) {
        if (std::find(first_before, first_before + k, after[shard * k + i]) == first_before + k) {
          ++moved;
        }
      }
    }
  }
  return moved;
}

}  // namespace brigade::eplb
