#include "bench/expert_load_generator.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

namespace brigade::bench {

const char* scenario_name(load_scenario s) {
  switch (s) {
    case load_scenario::steady:
      return "steady";
    case load_scenario::slow_drift:
      return "slow drift";
    case load_scenario::fast_drift:
      return "fast drift";
    case load_scenario::sudden_switch:
      return "sudden switch";
  }
  return "?";
}

expert_load_generator::expert_load_generator(const load_generator_config& config)
    : config_(config), rng_(config.seed) {
  zipf_share_.resize(config_.experts);
  double total = 0;
  for (int i = 0; i < config_.experts; ++i) {
    zipf_share_[i] = std::pow(i + 1.0, -config_.zipf_exponent);
    total += zipf_share_[i];
  }
  for (double& s : zipf_share_)
    s /= total;
  for (int layer = 0; layer < config_.layers; ++layer) {
    from_.push_back(permuted_shares());
    to_.push_back(permuted_shares());
  }
}

std::vector<double> expert_load_generator::permuted_shares() {
  std::vector<int> rank(config_.experts);
  std::iota(rank.begin(), rank.end(), 0);
  std::shuffle(rank.begin(), rank.end(), rng_);
  std::vector<double> share(config_.experts);
  for (int e = 0; e < config_.experts; ++e)
    share[e] = zipf_share_[rank[e]];
  return share;
}

int expert_load_generator::crossfade_windows() const {
  switch (config_.scenario) {
    case load_scenario::slow_drift:
      return config_.slow_crossfade_windows;
    case load_scenario::fast_drift:
      return config_.fast_crossfade_windows;
    case load_scenario::steady:
    case load_scenario::sudden_switch:
      break;
  }
  return 0;
}

eplb::load_matrix expert_load_generator::next_window() {
  const int period = crossfade_windows();
  if (period > 0 && window_ > 0 && window_ % period == 0) {
    // The crossfade is complete: its target becomes the start of the next one.
    for (int layer = 0; layer < config_.layers; ++layer) {
      from_[layer] = std::move(to_[layer]);
      to_[layer] = permuted_shares();
    }
  }
  if (config_.scenario == load_scenario::sudden_switch && window_ == config_.switch_window) {
    from_.swap(to_);
  }
  const double progress = period > 0 ? static_cast<double>(window_ % period) / period : 0.0;
  std::normal_distribution<double> noise(0.0, 1.0);
  eplb::load_matrix counts(config_.layers, std::vector<double>(config_.experts));
  for (int layer = 0; layer < config_.layers; ++layer) {
    for (int e = 0; e < config_.experts; ++e) {
      const double share = (1 - progress) * from_[layer][e] + progress * to_[layer][e];
      const double mean = config_.tokens_per_window * share;
      counts[layer][e] = std::max(0.0, std::round(mean + std::sqrt(mean) * noise(rng_)));
    }
  }
  ++window_;
  return counts;
}

}  // namespace brigade::bench
