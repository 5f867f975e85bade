// A workload whose expert routing is skewed and drifts, built on the served model: random
// candidate prompts are prefilled in one process and their routing counted
// (model/routing_profile.hpp); each phase takes the prompts that route most alike to one
// concentrated candidate, and each later phase starts from the candidate least like the phases
// before it. Played phase after phase, some experts are hot and the hot set changes.
#pragma once

#include <cstdint>
#include <vector>

#include "common/result.hpp"
#include "model/loaded_model.hpp"

namespace brigade::bench {

struct skew_options {
  int candidates = 96;  ///< Random prompts profiled.
  int prompt_tokens = 48;
  /// Distinct token ids a candidate draws from: few ids route to few experts.
  int alphabet = 3;
  int phases = 2;
  int prompts_per_phase = 12;
  uint64_t seed = 1;
};

struct skew_phase {
  std::vector<std::vector<int32_t>> prompts;
  /// Tokens routed to each expert by the phase's prompts: [MoE layer][expert].
  std::vector<std::vector<double>> load;
  /// The busiest expert over the mean expert, averaged over layers: how skewed the phase is
  /// (1 for even routing).
  double expert_max_over_mean = 1.0;
};

/// The phases, in order; fails when the model cannot be profiled or has too few candidates.
result<std::vector<skew_phase>> build_skewed_workload(const model::loaded_model& m,
                                                      gpu::backend& dev, const skew_options& o);

}  // namespace brigade::bench
