// Synthetic expert loads for `brigade bench balance`: per sample window, the tokens routed to
// each logical expert of each MoE layer.
//
// Popularity follows Zipf(s) over a random permutation of the experts: the expert of rank i gets a
// share proportional to (i + 1)^-s. Drift moves the popularity from one permutation to a freshly
// drawn one, linearly over a crossfade of some windows, then starts the next crossfade:
//   steady         one permutation forever;
//   slow drift     each crossfade takes slow_crossfade_windows (500: half a million steps);
//   fast drift     each crossfade takes fast_crossfade_windows (50);
//   sudden switch  steady until window switch_window, which jumps to a new permutation.
// Every expert's load thus changes smoothly, at a rate set by the scenario; during a crossfade the
// shape is a mix of two Zipf distributions. Counts are drawn around the expected share with
// Poisson-like noise (normal with variance equal to the mean).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "eplb/load_matrix.hpp"

namespace brigade::bench {

enum class load_scenario { steady, slow_drift, fast_drift, sudden_switch };

const char* scenario_name(load_scenario s);

struct load_generator_config {
  int layers = 58;
  int experts = 256;
  load_scenario scenario = load_scenario::steady;
  double zipf_exponent = 0.65;
  /// Token-to-expert assignments per layer per window: steps x tokens per step x experts/token.
  double tokens_per_window = 1000.0 * 4096 * 8;
  int slow_crossfade_windows = 500;
  int fast_crossfade_windows = 50;
  /// First window of the new permutation in the sudden-switch scenario.
  int switch_window = 100;
  uint64_t seed = 1;
};

class expert_load_generator {
 public:
  explicit expert_load_generator(const load_generator_config& config);

  /// The token counts of the next sample window, [layers][experts].
  eplb::load_matrix next_window();

  /// Windows produced so far.
  int windows() const { return window_; }

 private:
  std::vector<double> permuted_shares();
  /// Windows per crossfade for the scenario; 0 when the loads do not drift.
  int crossfade_windows() const;

  load_generator_config config_;
  std::mt19937_64 rng_;
  /// Per layer, the expected share of each expert at the start and the end of the crossfade.
  std::vector<std::vector<double>> from_;
  std::vector<std::vector<double>> to_;
  /// Zipf share of rank i, normalised to sum to one.
  std::vector<double> zipf_share_;
  int window_ = 0;
};

}  // namespace brigade::bench
